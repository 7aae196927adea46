"""Every endpoint of `/v1` as a typed method, written once for both clients.

A resource is generic in what its requester returns: `Client` gives it a requester whose methods return the object,
the page and an iterator; `AsyncClient` one whose methods return awaitables and an async iterator. Each method
names its endpoint as the OpenAPI document writes it (`tests/client/test_coverage.py` checks that every operation
of the live `/v1/openapi.json` is one of them, and that each sends what its endpoint expects).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from kagent_client._http import NOT_GIVEN, NotGiven, Request, Requester, given

O = TypeVar("O")  # noqa: E741  # one object: KObject, or Awaitable[KObject]
L = TypeVar("L")  # one page: Page, or Awaitable[Page]
I = TypeVar("I")  # noqa: E741  # every object of a list: Iterator[KObject], or AsyncIterator[KObject]

Json = Any
END_USER_TOKEN_HEADER = "X-End-User-Token"
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"


def _token(end_user_token: str | None) -> dict[str, str] | None:
    return {END_USER_TOKEN_HEADER: end_user_token} if end_user_token else None


class Resource(Generic[O, L, I]):
    def __init__(self, requester: Requester[O, L, I]) -> None:
        self._r = requester

    def _obj(self, method: str, template: str, /, body: Any = None, **options: Any) -> O:
        return self._r.obj(Request(method, template, json=body, **options))

    def _page(self, template: str, /, **options: Any) -> L:
        return self._r.page(Request("GET", template, **options))

    def _iterate(self, template: str, /, **options: Any) -> I:
        return self._r.iterate(Request("GET", template, **options))


class Agents(Resource[O, L, I]):
    """Agents: their draft `config`, published versions, diffs."""

    def create(
        self,
        *,
        name: str,
        config: dict[str, Json] | NotGiven = NOT_GIVEN,
        description: str | NotGiven = NOT_GIVEN,
        actions_paused: bool | NotGiven = NOT_GIVEN,
        traffic: Sequence[Mapping[str, int]] | None | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        split = traffic if isinstance(traffic, NotGiven) or traffic is None else [dict(entry) for entry in traffic]
        body = given(
            name=name, config=config, description=description, actions_paused=actions_paused, traffic=split, **fields
        )
        return self._obj("POST", "/v1/agents", body)

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> L:
        return self._page("/v1/agents", params={"limit": limit, "cursor": cursor})

    def iterate(self, *, limit: int | None = None) -> I:
        return self._iterate("/v1/agents", params={"limit": limit})

    def get(self, agent_id: str) -> O:
        return self._obj("GET", "/v1/agents/{agent_id}", path_params={"agent_id": agent_id})

    def update(
        self,
        agent_id: str,
        *,
        name: str | NotGiven = NOT_GIVEN,
        config: dict[str, Json] | NotGiven = NOT_GIVEN,
        description: str | NotGiven = NOT_GIVEN,
        actions_paused: bool | NotGiven = NOT_GIVEN,
        traffic: Sequence[Mapping[str, int]] | None | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        split = traffic if isinstance(traffic, NotGiven) or traffic is None else [dict(entry) for entry in traffic]
        body = given(
            name=name, config=config, description=description, actions_paused=actions_paused, traffic=split, **fields
        )
        return self._obj("PATCH", "/v1/agents/{agent_id}", body, path_params={"agent_id": agent_id})

    def delete(self, agent_id: str) -> O:
        return self._obj("DELETE", "/v1/agents/{agent_id}", path_params={"agent_id": agent_id})

    def publish(self, agent_id: str, *, note: str | NotGiven = NOT_GIVEN, force: bool | NotGiven = NOT_GIVEN) -> O:
        """Publish the draft as the next immutable version, once its checks pass (409 checks_failed; `force` with a
        note publishes anyway)."""
        return self._obj(
            "POST", "/v1/agents/{agent_id}/publish", given(note=note, force=force), path_params={"agent_id": agent_id}
        )

    def greeting(self, agent_id: str) -> O:
        """The published greeting a chat shows before the customer writes (a publishable key may read it)."""
        return self._obj("GET", "/v1/agents/{agent_id}/greeting", path_params={"agent_id": agent_id})

    def versions(self, agent_id: str, *, limit: int | None = None, cursor: str | None = None) -> L:
        return self._page(
            "/v1/agents/{agent_id}/versions",
            path_params={"agent_id": agent_id},
            params={"limit": limit, "cursor": cursor},
        )

    def iterate_versions(self, agent_id: str) -> I:
        return self._iterate("/v1/agents/{agent_id}/versions", path_params={"agent_id": agent_id})

    def version(self, agent_id: str, number: int) -> O:
        return self._obj(
            "GET", "/v1/agents/{agent_id}/versions/{number}", path_params={"agent_id": agent_id, "number": number}
        )

    def diff(self, agent_id: str, number: int, other: int) -> O:
        """What changed from version `number` to version `other` (config and HTTP tool definitions)."""
        return self._obj(
            "GET",
            "/v1/agents/{agent_id}/versions/{number}/diff/{other}",
            path_params={"agent_id": agent_id, "number": number, "other": other},
        )

    def restore(self, agent_id: str, number: int) -> O:
        """Make version `number`'s config the draft again."""
        return self._obj(
            "POST",
            "/v1/agents/{agent_id}/versions/{number}/restore",
            path_params={"agent_id": agent_id, "number": number},
            idempotent=True,  # the draft becomes that version's config, however often
        )

    def metrics(self, agent_id: str, number: int, *, since: int | str | None = None) -> O:
        """Version `number`'s figures since `since` (Unix seconds or a date; default 7 days ago)."""
        return self._obj(
            "GET",
            "/v1/agents/{agent_id}/versions/{number}/metrics",
            path_params={"agent_id": agent_id, "number": number},
            params={"since": since},
        )

    def checks(self, agent_id: str, *, limit: int | None = None, cursor: str | None = None) -> L:
        """The agent's saved checks (at most 50)."""
        return self._page(
            "/v1/agents/{agent_id}/checks",
            path_params={"agent_id": agent_id},
            params={"limit": limit, "cursor": cursor},
        )

    def create_check(
        self,
        agent_id: str,
        *,
        name: str | NotGiven = NOT_GIVEN,
        input: str | Sequence[str] | NotGiven = NOT_GIVEN,  # noqa: A002  (the API's field)
        end_user: Mapping[str, Json] | None | NotGiven = NOT_GIVEN,
        client_outputs: Mapping[str, Json] | NotGiven = NOT_GIVEN,
        expect: Mapping[str, Json] | NotGiven = NOT_GIVEN,
        from_run: str | NotGiven = NOT_GIVEN,
    ) -> O:
        """A check: `input` (a message or a list of them) and `expect`, or `from_run` (a run of this agent)."""
        body = given(
            name=name,
            input=input if isinstance(input, (str, NotGiven)) else list(input),
            end_user=end_user if isinstance(end_user, NotGiven) or end_user is None else dict(end_user),
            client_outputs=client_outputs if isinstance(client_outputs, NotGiven) else dict(client_outputs),
            expect=expect if isinstance(expect, NotGiven) else dict(expect),
            from_run=from_run,
        )
        return self._obj("POST", "/v1/agents/{agent_id}/checks", body, path_params={"agent_id": agent_id})

    def get_check(self, agent_id: str, check_id: str) -> O:
        return self._obj(
            "GET", "/v1/agents/{agent_id}/checks/{check_id}", path_params={"agent_id": agent_id, "check_id": check_id}
        )

    def update_check(self, agent_id: str, check_id: str, **fields: Json) -> O:
        return self._obj(
            "PATCH",
            "/v1/agents/{agent_id}/checks/{check_id}",
            fields,
            path_params={"agent_id": agent_id, "check_id": check_id},
        )

    def delete_check(self, agent_id: str, check_id: str) -> O:
        return self._obj(
            "DELETE",
            "/v1/agents/{agent_id}/checks/{check_id}",
            path_params={"agent_id": agent_id, "check_id": check_id},
        )

    def run_checks(self, agent_id: str, *, version: int | None | NotGiven = NOT_GIVEN) -> O:
        """Run every check in the sandbox (the draft, or a published `version`); answers at once, `running`."""
        return self._obj(
            "POST", "/v1/agents/{agent_id}/checks/run", given(version=version), path_params={"agent_id": agent_id}
        )

    def check_run(self, agent_id: str, check_run_id: str) -> O:
        return self._obj(
            "GET",
            "/v1/agents/{agent_id}/check_runs/{check_run_id}",
            path_params={"agent_id": agent_id, "check_run_id": check_run_id},
        )

    def rollback(self, agent_id: str, *, version: int) -> O:
        """All traffic to published `version` at once."""
        return self._obj(
            "POST",
            "/v1/agents/{agent_id}/rollback",
            {"version": version},
            path_params={"agent_id": agent_id},
            idempotent=True,  # the split becomes that one version, however often
        )


class Tools(Resource[O, L, I]):
    """HTTP tools, validated on write; a preview of the request and a live test call."""

    def create(
        self,
        *,
        name: str,
        description: str,
        effect: str,
        config: dict[str, Json],
        requires_verified_user: bool | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        body = given(
            name=name,
            description=description,
            effect=effect,
            config=config,
            requires_verified_user=requires_verified_user,
            **fields,
        )
        return self._obj("POST", "/v1/tools", body)

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> L:
        return self._page("/v1/tools", params={"limit": limit, "cursor": cursor})

    def iterate(self, *, limit: int | None = None) -> I:
        return self._iterate("/v1/tools", params={"limit": limit})

    def get(self, name: str) -> O:
        return self._obj("GET", "/v1/tools/{name}", path_params={"name": name})

    def update(
        self,
        name: str,
        *,
        description: str | NotGiven = NOT_GIVEN,
        effect: str | NotGiven = NOT_GIVEN,
        config: dict[str, Json] | NotGiven = NOT_GIVEN,
        requires_verified_user: bool | NotGiven = NOT_GIVEN,
        new_name: str | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        body = given(
            name=new_name,
            description=description,
            effect=effect,
            config=config,
            requires_verified_user=requires_verified_user,
            **fields,
        )
        return self._obj("PATCH", "/v1/tools/{name}", body, path_params={"name": name})

    def delete(self, name: str) -> O:
        return self._obj("DELETE", "/v1/tools/{name}", path_params={"name": name})

    def preview(
        self,
        name: str,
        *,
        arguments: dict[str, Json] | NotGiven = NOT_GIVEN,
        end_user: dict[str, Json] | NotGiven = NOT_GIVEN,
        variables: dict[str, Json] | NotGiven = NOT_GIVEN,
    ) -> O:
        """The request the tool would send for these arguments and end user (secrets masked); sends nothing."""
        body = given(arguments=arguments, end_user=end_user, variables=variables)
        return self._obj("POST", "/v1/tools/{name}/preview", body, path_params={"name": name}, idempotent=True)

    def test(
        self,
        name: str,
        *,
        arguments: dict[str, Json] | NotGiven = NOT_GIVEN,
        end_user: dict[str, Json] | NotGiven = NOT_GIVEN,
        variables: dict[str, Json] | NotGiven = NOT_GIVEN,
    ) -> O:
        """A live call to the business's API through the hardened client (not sent twice by retries)."""
        body = given(arguments=arguments, end_user=end_user, variables=variables)
        return self._obj("POST", "/v1/tools/{name}/test", body, path_params={"name": name})


class McpServers(Resource[O, L, I]):
    """The business's MCP servers: each is listed on write; its tools shown grantable or not, with the reason."""

    def create(
        self,
        *,
        name: str,
        url: str,
        headers: dict[str, Json] | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        """Lists the server's tools first: one that can't be listed is refused (422 mcp_unreachable)."""
        return self._obj("POST", "/v1/mcp_servers", given(name=name, url=url, headers=headers, **fields))

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> L:
        return self._page("/v1/mcp_servers", params={"limit": limit, "cursor": cursor})

    def iterate(self, *, limit: int | None = None) -> I:
        return self._iterate("/v1/mcp_servers", params={"limit": limit})

    def get(self, server_id: str) -> O:
        return self._obj("GET", "/v1/mcp_servers/{server_id}", path_params={"server_id": server_id})

    def update(
        self,
        server_id: str,
        *,
        name: str | NotGiven = NOT_GIVEN,
        url: str | NotGiven = NOT_GIVEN,
        headers: dict[str, Json] | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        """Fields given replace (headers whole); the tools are listed again."""
        body = given(name=name, url=url, headers=headers, **fields)
        return self._obj("PATCH", "/v1/mcp_servers/{server_id}", body, path_params={"server_id": server_id})

    def delete(self, server_id: str) -> O:
        return self._obj("DELETE", "/v1/mcp_servers/{server_id}", path_params={"server_id": server_id})

    def refresh(self, server_id: str) -> O:
        """Lists the tools again; on failure the previous listing stays and last_error says why."""
        return self._obj(
            "POST", "/v1/mcp_servers/{server_id}/refresh", path_params={"server_id": server_id}, idempotent=True
        )


class ToolDrafts(Resource[O, L, I]):
    """Preview and test a tool definition that is not saved yet."""

    def preview(
        self,
        *,
        tool: dict[str, Json],
        arguments: dict[str, Json] | NotGiven = NOT_GIVEN,
        end_user: dict[str, Json] | NotGiven = NOT_GIVEN,
        variables: dict[str, Json] | NotGiven = NOT_GIVEN,
    ) -> O:
        body = given(tool=tool, arguments=arguments, end_user=end_user, variables=variables)
        return self._obj("POST", "/v1/tool_drafts/preview", body, idempotent=True)

    def test(
        self,
        *,
        tool: dict[str, Json],
        arguments: dict[str, Json] | NotGiven = NOT_GIVEN,
        end_user: dict[str, Json] | NotGiven = NOT_GIVEN,
        variables: dict[str, Json] | NotGiven = NOT_GIVEN,
    ) -> O:
        body = given(tool=tool, arguments=arguments, end_user=end_user, variables=variables)
        return self._obj("POST", "/v1/tool_drafts/test", body)


class Secrets(Resource[O, L, I]):
    """Write-only secrets: reads show the name, allowed hosts, last four characters and when it changed."""

    def put(self, name: str, *, value: str, allowed_hosts: Sequence[str]) -> O:
        """Create or replace the secret `name`."""
        body = {"value": value, "allowed_hosts": [*allowed_hosts]}
        return self._obj("PUT", "/v1/secrets/{name}", body, path_params={"name": name})

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> L:
        return self._page("/v1/secrets", params={"limit": limit, "cursor": cursor})

    def iterate(self, *, limit: int | None = None) -> I:
        return self._iterate("/v1/secrets", params={"limit": limit})

    def get(self, name: str) -> O:
        return self._obj("GET", "/v1/secrets/{name}", path_params={"name": name})

    def delete(self, name: str) -> O:
        return self._obj("DELETE", "/v1/secrets/{name}", path_params={"name": name})


class ToolSigningSecret(Resource[O, L, I]):
    """The secret that signs every call to the business's URLs (Standard Webhooks)."""

    def get(self) -> O:
        return self._obj("GET", "/v1/tool_signing_secret")

    def rotate(self) -> O:
        """A new secret; the old one keeps signing too for 24 hours."""
        return self._obj("POST", "/v1/tool_signing_secret/rotate")


class EndUserSecret(Resource[O, L, I]):
    """The secret the business's server signs `end_user_token`s with (HS256)."""

    def get(self) -> O:
        return self._obj("GET", "/v1/end_user_secret")

    def rotate(self) -> O:
        return self._obj("POST", "/v1/end_user_secret/rotate")


class EgressEvents(Resource[O, L, I]):
    """Every outbound call and refusal of the project, with its decision."""

    def list(
        self,
        *,
        decision: str | None = None,
        host: str | None = None,
        purpose: str | None = None,
        created_after: int | None = None,
        created_before: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> L:
        filters = {"decision": decision, "host": host, "purpose": purpose}
        times = {"created_after": created_after, "created_before": created_before}
        return self._page("/v1/egress_events", params={**filters, **times, "limit": limit, "cursor": cursor})

    def iterate(
        self,
        *,
        decision: str | None = None,
        host: str | None = None,
        purpose: str | None = None,
        created_after: int | None = None,
        created_before: int | None = None,
    ) -> I:
        filters = {"decision": decision, "host": host, "purpose": purpose}
        times = {"created_after": created_after, "created_before": created_before}
        return self._iterate("/v1/egress_events", params={**filters, **times})


class Sessions(Resource[O, L, I]):
    """Conversations with one end user."""

    def create(
        self,
        *,
        agent: str,
        end_user: dict[str, Json] | NotGiven = NOT_GIVEN,
        end_user_token: str | NotGiven = NOT_GIVEN,
        metadata: dict[str, Json] | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        body = given(agent=agent, end_user=end_user, end_user_token=end_user_token, metadata=metadata, **fields)
        return self._obj("POST", "/v1/sessions", body)

    def list(
        self,
        *,
        agent: str | None = None,
        status: str | None = None,
        flagged: bool | None = None,
        end_user: str | None = None,
        include_tests: bool | None = None,
        created_after: int | None = None,
        created_before: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> L:
        filters = {"agent": agent, "status": status, "flagged": flagged, "end_user": end_user}
        more = {"include_tests": include_tests, "created_after": created_after, "created_before": created_before}
        return self._page("/v1/sessions", params={**filters, **more, "limit": limit, "cursor": cursor})

    def iterate(
        self,
        *,
        agent: str | None = None,
        status: str | None = None,
        flagged: bool | None = None,
        end_user: str | None = None,
        include_tests: bool | None = None,
        created_after: int | None = None,
        created_before: int | None = None,
    ) -> I:
        filters = {"agent": agent, "status": status, "flagged": flagged, "end_user": end_user}
        more = {"include_tests": include_tests, "created_after": created_after, "created_before": created_before}
        return self._iterate("/v1/sessions", params={**filters, **more})

    def get(self, session_id: str, *, end_user_token: str | None = None) -> O:
        return self._obj(
            "GET", "/v1/sessions/{session_id}", path_params={"session_id": session_id}, headers=_token(end_user_token)
        )

    def messages(
        self,
        session_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        end_user_token: str | None = None,
    ) -> L:
        return self._page(
            "/v1/sessions/{session_id}/messages",
            path_params={"session_id": session_id},
            params={"limit": limit, "cursor": cursor},
            headers=_token(end_user_token),
        )

    def iterate_messages(self, session_id: str, *, end_user_token: str | None = None) -> I:
        return self._iterate(
            "/v1/sessions/{session_id}/messages", path_params={"session_id": session_id}, headers=_token(end_user_token)
        )

    def write(
        self,
        session_id: str,
        *,
        role: str,
        content: str,
        author: str | NotGiven = NOT_GIVEN,
        end_user_token: str | None = None,
    ) -> O:
        """A message written into the conversation (a live handoff): `role="team"` with its `author` (a person of
        your team; secret key), or `role="user"` (the customer's words, for the team; never starts a run)."""
        return self._obj(
            "POST",
            "/v1/sessions/{session_id}/messages",
            given(role=role, content=content, author=author),
            path_params={"session_id": session_id},
            headers=_token(end_user_token),
        )

    def update(self, session_id: str, *, status: str) -> O:
        """`status="open"` hands the conversation back to the agent; `"closed"` closes it (secret key)."""
        return self._obj(
            "PATCH", "/v1/sessions/{session_id}", {"status": status}, path_params={"session_id": session_id}
        )


class Runs(Resource[O, L, I]):
    """Runs of an agent (the endpoints; `Client.runs` and `AsyncClient.runs` add waiting, the client-tool loop
    and event streams)."""

    def create(
        self,
        *,
        agent: str,
        input: str,
        version: int | NotGiven = NOT_GIVEN,
        session: str | NotGiven = NOT_GIVEN,
        end_user: dict[str, Json] | NotGiven = NOT_GIVEN,
        end_user_token: str | NotGiven = NOT_GIVEN,
        store: bool | NotGiven = NOT_GIVEN,
        allow_actions: bool | NotGiven = NOT_GIVEN,
        metadata: dict[str, Json] | NotGiven = NOT_GIVEN,
        sandbox: bool | dict[str, Json] | NotGiven = NOT_GIVEN,
        run_real_actions: bool | NotGiven = NOT_GIVEN,
        wait: float | NotGiven = NOT_GIVEN,
        idempotency_key: str | None | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        """Start a run. With `wait` (up to 30 s) the answer comes when the run ended or needs client-tool outputs,
        or as it stands then.

        With a secret key the request carries an `Idempotency-Key` (a new UUID unless `idempotency_key` gives one;
        None sends none), so it is sent again after a lost answer or a 5xx as well: the server answers a request
        sent again with the run the first one started. Without one it is never sent twice unless the server refused
        it before creating anything."""
        if fields.get("stream"):
            raise ValueError("A streamed run is read as events: use runs.create_and_stream(…).")
        body = given(
            agent=agent,
            input=input,
            version=version,
            session=session,
            end_user=end_user,
            end_user_token=end_user_token,
            store=store,
            allow_actions=allow_actions,
            metadata=metadata,
            sandbox=sandbox,
            run_real_actions=run_real_actions,
            wait=wait,
            **fields,
        )
        if isinstance(idempotency_key, NotGiven):
            idempotency_key = str(uuid.uuid4()) if self._r.secret_key else None
        if idempotency_key is None:
            return self._obj("POST", "/v1/runs", body)
        headers = {IDEMPOTENCY_KEY_HEADER: idempotency_key}
        return self._obj("POST", "/v1/runs", body, headers=headers, idempotent=True)

    def list(
        self,
        *,
        agent: str | None = None,
        status: str | None = None,
        end_user: str | None = None,
        session: str | None = None,
        sandbox: bool | None = None,
        created_after: int | None = None,
        created_before: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> L:
        filters = {"agent": agent, "status": status, "end_user": end_user, "session": session, "sandbox": sandbox}
        times = {"created_after": created_after, "created_before": created_before}
        return self._page("/v1/runs", params={**filters, **times, "limit": limit, "cursor": cursor})

    def iterate(
        self,
        *,
        agent: str | None = None,
        status: str | None = None,
        end_user: str | None = None,
        session: str | None = None,
        sandbox: bool | None = None,
        created_after: int | None = None,
        created_before: int | None = None,
    ) -> I:
        filters = {"agent": agent, "status": status, "end_user": end_user, "session": session, "sandbox": sandbox}
        times = {"created_after": created_after, "created_before": created_before}
        return self._iterate("/v1/runs", params={**filters, **times})

    def get(self, run_id: str, *, end_user_token: str | None = None) -> O:
        return self._obj("GET", "/v1/runs/{run_id}", path_params={"run_id": run_id}, headers=_token(end_user_token))

    def steps(self, run_id: str) -> L:
        """Every model call and tool call of the run with its policy decision (secret keys only)."""
        return self._page("/v1/runs/{run_id}/steps", path_params={"run_id": run_id})

    def submit_tool_outputs(
        self, run_id: str, *, tool_outputs: Sequence[Mapping[str, Json]], end_user_token: str | None = None
    ) -> O:
        """Answer every open client-tool call: `[{"call_id", "output", "is_error"}]`."""
        body = given(tool_outputs=[dict(output) for output in tool_outputs], end_user_token=end_user_token or NOT_GIVEN)
        return self._obj("POST", "/v1/runs/{run_id}/submit_tool_outputs", body, path_params={"run_id": run_id})

    def approve_tool_calls(self, run_id: str, *, decisions: Sequence[Mapping[str, Json]]) -> O:
        """A person's decision on every call a run waits for approval on (secret keys only):
        `[{"call_id", "decision": "approve" | "deny", "scope": "once" | "session", "note"}]`."""
        body = {"decisions": [dict(decision) for decision in decisions]}
        return self._obj("POST", "/v1/runs/{run_id}/approve_tool_calls", body, path_params={"run_id": run_id})

    def cancel(self, run_id: str, *, end_user_token: str | None = None) -> O:
        return self._obj(
            "POST",
            "/v1/runs/{run_id}/cancel",
            path_params={"run_id": run_id},
            headers=_token(end_user_token),
            idempotent=True,  # a cancelled run stays cancelled
        )


class Tickets(Resource[O, L, I]):
    """The desk's tickets; test objects only with `include_tests=True`."""

    def list(
        self,
        *,
        status: str | None = None,
        include_tests: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> L:
        params = {"status": status, "include_tests": include_tests, "limit": limit, "cursor": cursor}
        return self._page("/v1/tickets", params=params)

    def iterate(self, *, status: str | None = None, include_tests: bool | None = None) -> I:
        return self._iterate("/v1/tickets", params={"status": status, "include_tests": include_tests})

    def get(self, ticket_id: str) -> O:
        return self._obj("GET", "/v1/tickets/{ticket_id}", path_params={"ticket_id": ticket_id})

    def update(self, ticket_id: str, *, status: str | NotGiven = NOT_GIVEN, priority: str | NotGiven = NOT_GIVEN) -> O:
        """Close (`status="closed"`) or reopen (`"open"`) a ticket, or change its priority."""
        body = given(status=status, priority=priority)
        return self._obj("PATCH", "/v1/tickets/{ticket_id}", body, path_params={"ticket_id": ticket_id})


class Handoffs(Resource[O, L, I]):
    """The desk's handoffs to a human; test objects only with `include_tests=True`."""

    def list(
        self,
        *,
        status: str | None = None,
        include_tests: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> L:
        params = {"status": status, "include_tests": include_tests, "limit": limit, "cursor": cursor}
        return self._page("/v1/handoffs", params=params)

    def iterate(self, *, status: str | None = None, include_tests: bool | None = None) -> I:
        return self._iterate("/v1/handoffs", params={"status": status, "include_tests": include_tests})

    def get(self, handoff_id: str) -> O:
        return self._obj("GET", "/v1/handoffs/{handoff_id}", path_params={"handoff_id": handoff_id})

    def update(
        self,
        handoff_id: str,
        *,
        status: str | NotGiven = NOT_GIVEN,
        assignee: str | None | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        """Close (`status="closed"`) or reopen (`"open"`) a handoff, or say who on the team has it."""
        body = given(status=status, assignee=assignee, **fields)
        return self._obj("PATCH", "/v1/handoffs/{handoff_id}", body, path_params={"handoff_id": handoff_id})


class KnowledgeSources(Resource[O, L, I]):
    """Knowledge: `text` (Markdown) and `api` sources, split into passages for `search_knowledge`."""

    def create(
        self,
        *,
        title: str,
        kind: str | NotGiven = NOT_GIVEN,
        content: str | NotGiven = NOT_GIVEN,
        url: str | NotGiven = NOT_GIVEN,
        response: dict[str, Json] | NotGiven = NOT_GIVEN,
        agent: str | None | NotGiven = NOT_GIVEN,
        refresh_minutes: int | NotGiven = NOT_GIVEN,
        searchable: bool | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        body = given(
            title=title,
            kind=kind,
            content=content,
            url=url,
            response=response,
            agent=agent,
            refresh_minutes=refresh_minutes,
            searchable=searchable,
            **fields,
        )
        return self._obj("POST", "/v1/knowledge_sources", body)

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> L:
        return self._page("/v1/knowledge_sources", params={"limit": limit, "cursor": cursor})

    def iterate(self, *, limit: int | None = None) -> I:
        return self._iterate("/v1/knowledge_sources", params={"limit": limit})

    def get(self, source_id: str) -> O:
        return self._obj("GET", "/v1/knowledge_sources/{source_id}", path_params={"source_id": source_id})

    def update(
        self,
        source_id: str,
        *,
        title: str | NotGiven = NOT_GIVEN,
        content: str | NotGiven = NOT_GIVEN,
        url: str | NotGiven = NOT_GIVEN,
        response: dict[str, Json] | NotGiven = NOT_GIVEN,
        agent: str | None | NotGiven = NOT_GIVEN,
        refresh_minutes: int | NotGiven = NOT_GIVEN,
        searchable: bool | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        body = given(
            title=title,
            content=content,
            url=url,
            response=response,
            agent=agent,
            refresh_minutes=refresh_minutes,
            searchable=searchable,
            **fields,
        )
        return self._obj("PATCH", "/v1/knowledge_sources/{source_id}", body, path_params={"source_id": source_id})

    def delete(self, source_id: str) -> O:
        return self._obj("DELETE", "/v1/knowledge_sources/{source_id}", path_params={"source_id": source_id})

    def refresh(self, source_id: str) -> O:
        """Fetch an `api` source now (one fetch is queued at a time)."""
        return self._obj(
            "POST",
            "/v1/knowledge_sources/{source_id}/refresh",
            path_params={"source_id": source_id},
            idempotent=True,  # one fetch queued at a time: a second request queues nothing more
        )


class WebhookEndpoints(Resource[O, L, I]):
    """Where the project's events (`ticket.created`, …) are delivered, signed; each endpoint's delivery log."""

    def create(
        self,
        *,
        url: str,
        event_types: Sequence[str],
        description: str | NotGiven = NOT_GIVEN,
        enabled: bool | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        body = given(url=url, event_types=[*event_types], description=description, enabled=enabled, **fields)
        return self._obj("POST", "/v1/webhook_endpoints", body)

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> L:
        return self._page("/v1/webhook_endpoints", params={"limit": limit, "cursor": cursor})

    def iterate(self, *, limit: int | None = None) -> I:
        return self._iterate("/v1/webhook_endpoints", params={"limit": limit})

    def get(self, endpoint_id: str) -> O:
        return self._obj("GET", "/v1/webhook_endpoints/{endpoint_id}", path_params={"endpoint_id": endpoint_id})

    def update(
        self,
        endpoint_id: str,
        *,
        url: str | NotGiven = NOT_GIVEN,
        event_types: Sequence[str] | NotGiven = NOT_GIVEN,
        description: str | NotGiven = NOT_GIVEN,
        enabled: bool | NotGiven = NOT_GIVEN,
        **fields: Json,
    ) -> O:
        types = event_types if isinstance(event_types, NotGiven) else [*event_types]
        body = given(url=url, event_types=types, description=description, enabled=enabled, **fields)
        return self._obj("PATCH", "/v1/webhook_endpoints/{endpoint_id}", body, path_params={"endpoint_id": endpoint_id})

    def delete(self, endpoint_id: str) -> O:
        return self._obj("DELETE", "/v1/webhook_endpoints/{endpoint_id}", path_params={"endpoint_id": endpoint_id})

    def rotate_secret(self, endpoint_id: str) -> O:
        """A new signing secret for the endpoint."""
        return self._obj(
            "POST", "/v1/webhook_endpoints/{endpoint_id}/rotate_secret", path_params={"endpoint_id": endpoint_id}
        )

    def deliveries(
        self, endpoint_id: str, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> L:
        return self._page(
            "/v1/webhook_endpoints/{endpoint_id}/deliveries",
            path_params={"endpoint_id": endpoint_id},
            params={"status": status, "limit": limit, "cursor": cursor},
        )

    def iterate_deliveries(self, endpoint_id: str, *, status: str | None = None) -> I:
        return self._iterate(
            "/v1/webhook_endpoints/{endpoint_id}/deliveries",
            path_params={"endpoint_id": endpoint_id},
            params={"status": status},
        )

    def redeliver(self, endpoint_id: str, delivery_id: str) -> O:
        """Send a delivery again (with its event's id, so the receiver can deduplicate)."""
        return self._obj(
            "POST",
            "/v1/webhook_endpoints/{endpoint_id}/deliveries/{delivery_id}/redeliver",
            path_params={"endpoint_id": endpoint_id, "delivery_id": delivery_id},
        )
