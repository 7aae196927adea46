"""The tenant sweep (issue #12): every operation of `/v1/openapi.json` that names or reaches an object is called with
another project's secret key and its publishable key, against an object of every kind of alice's.

- An object of hers is answered exactly as an id that exists nowhere (same status, same body once the two ids are
  written the same): a 404 (or, for what a publishable key may never do, the same 403), so nothing is learned.
- Lists and the project's singletons show bob his own things: none of alice's ids, names or secrets appear in any
  answer.
- Nothing of hers changed: every row of every table outside bob's project is the same afterwards.

The operations come from the OpenAPI document: a new endpoint without a probe here fails the sweep.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
import pytest
from django.apps import apps
from django.urls import resolve

from kagent.converters import ID_PATTERN
from kagent.ids import new_id
from tests.conftest import Tenant, make_tenant
from tests.proofs.conftest import SECRET_NAME, World

pytestmark = pytest.mark.django_db


@dataclass
class Refs:
    """What a probe names: alice's real objects, or ids of the same shape that exist nowhere."""

    agent: str
    session: str
    paused_run: str
    call_id: str
    done_run: str
    ticket: str
    handoff: str
    source: str
    tool: str
    secret: str
    end_user: str
    end_user_token: str
    endpoint: str
    delivery: str
    mcp_server: str
    check: str
    check_run: str

    @staticmethod
    def of(world: World) -> Refs:
        return Refs(
            world.agent,
            world.session,
            world.paused_run,
            world.call_id,
            world.done_run,
            world.ticket,
            world.handoff,
            world.source,
            world.tool,
            world.secret,
            world.end_user,
            world.end_user_token,
            world.endpoint,
            world.delivery,
            world.mcp_server,
            world.check,
            world.check_run,
        )

    @staticmethod
    def nowhere(world: World) -> Refs:
        return Refs(
            new_id("agt"),
            new_id("ses"),
            new_id("run"),
            new_id("call"),
            new_id("run"),
            new_id("tkt"),
            new_id("hof"),
            new_id("ks"),
            "nobody_order_status",
            "NOBODY_ORDERS_TOKEN",
            "nobody-cust-42",
            jwt.encode({"sub": "nobody-cust-42", "exp": int(time.time()) + 600}, "a" * 32, "HS256"),
            new_id("we"),
            new_id("whd"),
            new_id("mcp"),
            new_id("chk"),
            new_id("chkr"),
        )

    def pairs(self) -> dict[str, str]:
        return {name: value for name, value in vars(self).items()}


@dataclass
class Call:
    method: str
    path: str
    body: Any = None
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


Probe = Callable[[Refs, Tenant], list[Call]]

BOBS_ENDPOINT = {"url": "https://b.example/h", "event_types": ["run.failed"]}

# How each operation is swept. `object`: names one of alice's objects (404 like an id of nowhere); `reference`: a
# write in bob's project that names one of alice's objects by id (refused like an id of nowhere); `name`: a write in
# bob's project naming alice's tool or secret by name (names are each project's own: answered as a name of
# nowhere); `list` / `own`: bob's own view (none of alice's things in it; a `list` is also asked with filters
# naming alice's objects, and answered as with filters naming nothing).
KINDS: dict[str, tuple[str, Probe]] = {
    # agents
    "agents_list": ("list", lambda r, b: [Call("GET", "/v1/agents")]),
    "agents_create": (
        "name",
        lambda r, b: [
            Call("POST", "/v1/agents", {"name": "x", "config": {"tools": {"http": [{"tool": r.tool}]}}}),
            Call(
                "POST",
                "/v1/agents",
                {
                    "name": "x",
                    "config": {
                        "model": {
                            "provider": "openai_compatible",
                            "name": "m",
                            "base_url": "https://api.example.com/v1",
                            "api_key_secret": r.secret,
                        }
                    },
                },
            ),
        ],
    ),
    "agents_retrieve": ("object", lambda r, b: [Call("GET", f"/v1/agents/{r.agent}")]),
    "agents_update": (
        "object",
        lambda r, b: [Call("PATCH", f"/v1/agents/{r.agent}", {"name": "pwned", "actions_paused": True})],
    ),
    "agents_delete": ("object", lambda r, b: [Call("DELETE", f"/v1/agents/{r.agent}")]),
    "agents_publish": ("object", lambda r, b: [Call("POST", f"/v1/agents/{r.agent}/publish", {"note": "pwned"})]),
    "agents_versions_list": ("object", lambda r, b: [Call("GET", f"/v1/agents/{r.agent}/versions")]),
    "agents_versions_retrieve": (
        "object",
        lambda r, b: [Call("GET", f"/v1/agents/{r.agent}/versions/{n}") for n in (1, 2, 9)],
    ),
    "agents_versions_diff": ("object", lambda r, b: [Call("GET", f"/v1/agents/{r.agent}/versions/1/diff/2")]),
    "agents_versions_restore": ("object", lambda r, b: [Call("POST", f"/v1/agents/{r.agent}/versions/1/restore")]),
    "agents_checks_list": ("object", lambda r, b: [Call("GET", f"/v1/agents/{r.agent}/checks")]),
    "agents_checks_create": (
        "object",
        lambda r, b: [Call("POST", f"/v1/agents/{r.agent}/checks", {"name": "pwned", "input": "hi"})],
    ),
    "agents_checks_retrieve": ("object", lambda r, b: [Call("GET", f"/v1/agents/{r.agent}/checks/{r.check}")]),
    "agents_checks_update": (
        "object",
        lambda r, b: [Call("PATCH", f"/v1/agents/{r.agent}/checks/{r.check}", {"name": "pwned"})],
    ),
    "agents_checks_delete": ("object", lambda r, b: [Call("DELETE", f"/v1/agents/{r.agent}/checks/{r.check}")]),
    "agents_checks_run": ("object", lambda r, b: [Call("POST", f"/v1/agents/{r.agent}/checks/run", {})]),
    "agents_check_runs_retrieve": (
        "object",
        lambda r, b: [Call("GET", f"/v1/agents/{r.agent}/check_runs/{r.check_run}")],
    ),
    "agents_greeting": ("object", lambda r, b: [Call("GET", f"/v1/agents/{r.agent}/greeting")]),
    "agents_versions_metrics": ("object", lambda r, b: [Call("GET", f"/v1/agents/{r.agent}/versions/1/metrics")]),
    "agents_rollback": ("object", lambda r, b: [Call("POST", f"/v1/agents/{r.agent}/rollback", {"version": 1})]),
    # knowledge
    "knowledge_sources_list": ("list", lambda r, b: [Call("GET", "/v1/knowledge_sources")]),
    "knowledge_sources_create": (
        "reference",
        lambda r, b: [Call("POST", "/v1/knowledge_sources", {"agent": r.agent, "title": "t", "content": "c"})],
    ),
    "knowledge_sources_retrieve": ("object", lambda r, b: [Call("GET", f"/v1/knowledge_sources/{r.source}")]),
    "knowledge_sources_update": (
        "object",
        lambda r, b: [Call("PATCH", f"/v1/knowledge_sources/{r.source}", {"title": "pwned", "searchable": False})],
    ),
    "knowledge_sources_delete": ("object", lambda r, b: [Call("DELETE", f"/v1/knowledge_sources/{r.source}")]),
    "knowledge_sources_refresh": ("object", lambda r, b: [Call("POST", f"/v1/knowledge_sources/{r.source}/refresh")]),
    # tools
    "tools_list": ("list", lambda r, b: [Call("GET", "/v1/tools")]),
    "tools_create": ("name", lambda r, b: [Call("POST", "/v1/tools", _tool_using(r.secret, f"bob_{r.tool}"))]),
    "tools_retrieve": ("object", lambda r, b: [Call("GET", f"/v1/tools/{r.tool}")]),
    "tools_update": ("object", lambda r, b: [Call("PATCH", f"/v1/tools/{r.tool}", {"description": "pwned"})]),
    "tools_delete": ("object", lambda r, b: [Call("DELETE", f"/v1/tools/{r.tool}")]),
    "tools_preview": (
        "object",
        lambda r, b: [Call("POST", f"/v1/tools/{r.tool}/preview", {"arguments": {"order_number": "1"}})],
    ),
    "tools_test": (
        "object",
        lambda r, b: [Call("POST", f"/v1/tools/{r.tool}/test", {"arguments": {"order_number": "1"}})],
    ),
    "tool_drafts_preview": (
        "name",
        lambda r, b: [
            Call("POST", "/v1/tool_drafts/preview", {"tool": _tool_using(r.secret, "d"), "arguments": {"n": "1"}})
        ],
    ),
    "tool_drafts_test": (
        "name",
        lambda r, b: [
            Call("POST", "/v1/tool_drafts/test", {"tool": _tool_using(r.secret, "d"), "arguments": {"n": "1"}})
        ],
    ),
    # MCP servers
    "mcp_servers_list": ("list", lambda r, b: [Call("GET", "/v1/mcp_servers")]),
    # Bob's server naming alice's secret: a secret of nowhere to him (refused before anything is sent).
    "mcp_servers_create": (
        "name",
        lambda r, b: [
            Call(
                "POST",
                "/v1/mcp_servers",
                {
                    "name": "bobs",
                    "url": "https://api.example.com/mcp",
                    "headers": {"Authorization": "Bearer {{secret." + r.secret + "}}"},
                },
            )
        ],
    ),
    "mcp_servers_retrieve": ("object", lambda r, b: [Call("GET", f"/v1/mcp_servers/{r.mcp_server}")]),
    "mcp_servers_update": (
        "object",
        lambda r, b: [Call("PATCH", f"/v1/mcp_servers/{r.mcp_server}", {"url": "https://evil.example/mcp"})],
    ),
    "mcp_servers_delete": ("object", lambda r, b: [Call("DELETE", f"/v1/mcp_servers/{r.mcp_server}")]),
    "mcp_servers_refresh": ("object", lambda r, b: [Call("POST", f"/v1/mcp_servers/{r.mcp_server}/refresh")]),
    # secrets and signing secrets
    "secrets_list": ("list", lambda r, b: [Call("GET", "/v1/secrets")]),
    "secrets_retrieve": ("object", lambda r, b: [Call("GET", f"/v1/secrets/{r.secret}")]),
    "secrets_delete": ("object", lambda r, b: [Call("DELETE", f"/v1/secrets/{r.secret}")]),
    # A name is the project's own: bob writing "ALICE_ORDERS_TOKEN" makes a secret of his, as any new name would.
    "secrets_put": (
        "name",
        lambda r, b: [Call("PUT", f"/v1/secrets/{r.secret}", {"value": "bobs-value", "allowed_hosts": ["b.example"]})],
    ),
    "tool_signing_secret_retrieve": ("own", lambda r, b: [Call("GET", "/v1/tool_signing_secret")]),
    "tool_signing_secret_rotate": ("own", lambda r, b: [Call("POST", "/v1/tool_signing_secret/rotate")]),
    "end_user_secret_retrieve": ("own", lambda r, b: [Call("GET", "/v1/end_user_secret")]),
    "end_user_secret_rotate": ("own", lambda r, b: [Call("POST", "/v1/end_user_secret/rotate")]),
    "egress_events_list": ("list", lambda r, b: [Call("GET", "/v1/egress_events", query={"host": "api.example.com"})]),
    # sessions
    "sessions_list": (
        "list",
        lambda r, b: [Call("GET", "/v1/sessions", query={"agent": r.agent, "end_user": r.end_user})],
    ),
    "sessions_create": (
        "reference",
        lambda r, b: [
            Call("POST", "/v1/sessions", {"agent": r.agent}),
            Call("POST", "/v1/sessions", {"agent": _bobs_agent(b), "end_user_token": r.end_user_token}),
        ],
    ),
    "sessions_retrieve": (
        "object",
        lambda r, b: [
            Call("GET", f"/v1/sessions/{r.session}"),
            Call("GET", f"/v1/sessions/{r.session}", headers={"X-End-User-Token": r.end_user_token}),
        ],
    ),
    "sessions_messages_list": ("object", lambda r, b: [Call("GET", f"/v1/sessions/{r.session}/messages")]),
    "sessions_messages_create": (
        "object",
        lambda r, b: [
            Call("POST", f"/v1/sessions/{r.session}/messages", {"role": "team", "content": "pwned", "author": "Bob"}),
            Call("POST", f"/v1/sessions/{r.session}/messages", {"role": "user", "content": "pwned"}),
        ],
    ),
    "sessions_update": ("object", lambda r, b: [Call("PATCH", f"/v1/sessions/{r.session}", {"status": "closed"})]),
    "sessions_events": (
        "object",
        lambda r, b: [Call("GET", f"/v1/sessions/{r.session}/events", headers={"Accept": "text/event-stream"})],
    ),
    # runs
    "runs_list": (
        "list",
        lambda r, b: [
            Call("GET", "/v1/runs", query={"agent": r.agent}),
            Call("GET", "/v1/runs", query={"end_user": r.end_user}),
            Call("GET", "/v1/runs", headers={"X-End-User-Token": r.end_user_token}),
        ],
    ),
    "runs_create": (
        "reference",
        lambda r, b: [
            Call("POST", "/v1/runs", {"agent": r.agent, "input": "hi"}),
            Call("POST", "/v1/runs", {"agent": r.agent, "input": "hi", "sandbox": True}),
            Call("POST", "/v1/runs", {"agent": _bobs_agent(b), "session": r.session, "input": "hi"}),
            Call("POST", "/v1/runs", {"agent": _bobs_agent(b), "input": "hi", "end_user_token": r.end_user_token}),
        ],
    ),
    "runs_retrieve": (
        "object",
        lambda r, b: [
            Call("GET", f"/v1/runs/{run}", headers={"X-End-User-Token": r.end_user_token})
            for run in (r.paused_run, r.done_run)
        ],
    ),
    "runs_steps_list": ("object", lambda r, b: [Call("GET", f"/v1/runs/{r.done_run}/steps")]),
    "runs_events": (
        "object",
        lambda r, b: [Call("GET", f"/v1/runs/{r.paused_run}/events", headers={"Accept": "text/event-stream"})],
    ),
    "runs_submit_tool_outputs": (
        "object",
        lambda r, b: [
            Call(
                "POST",
                f"/v1/runs/{r.paused_run}/submit_tool_outputs",
                {"tool_outputs": [{"call_id": r.call_id, "output": {"items": 0}}], "end_user_token": r.end_user_token},
            ),
            Call("POST", f"/v1/runs/{r.paused_run}/submit_tool_outputs", {"tool_outputs": []}),
        ],
    ),
    "runs_approve_tool_calls": (
        "object",
        lambda r, b: [
            Call(
                "POST",
                f"/v1/runs/{r.paused_run}/approve_tool_calls",
                {"decisions": [{"call_id": r.call_id, "decision": "approve"}]},
            ),
            Call("POST", f"/v1/runs/{r.done_run}/approve_tool_calls", {"decisions": []}),
        ],
    ),
    "runs_cancel": (
        "object",
        lambda r, b: [Call("POST", f"/v1/runs/{run}/cancel") for run in (r.paused_run, r.done_run)],
    ),
    # the desk
    "tickets_list": ("list", lambda r, b: [Call("GET", "/v1/tickets", query={"include_tests": "true"})]),
    "tickets_retrieve": ("object", lambda r, b: [Call("GET", f"/v1/tickets/{r.ticket}")]),
    "tickets_update": ("object", lambda r, b: [Call("PATCH", f"/v1/tickets/{r.ticket}", {"status": "closed"})]),
    "handoffs_list": ("list", lambda r, b: [Call("GET", "/v1/handoffs", query={"include_tests": "true"})]),
    "handoffs_retrieve": ("object", lambda r, b: [Call("GET", f"/v1/handoffs/{r.handoff}")]),
    "handoffs_update": ("object", lambda r, b: [Call("PATCH", f"/v1/handoffs/{r.handoff}", {"status": "closed"})]),
    # webhooks
    "webhook_endpoints_list": ("list", lambda r, b: [Call("GET", "/v1/webhook_endpoints")]),
    "webhook_endpoints_create": (
        "own",
        lambda r, b: [Call("POST", "/v1/webhook_endpoints", BOBS_ENDPOINT)],
    ),
    "webhook_endpoints_retrieve": ("object", lambda r, b: [Call("GET", f"/v1/webhook_endpoints/{r.endpoint}")]),
    "webhook_endpoints_update": (
        "object",
        lambda r, b: [Call("PATCH", f"/v1/webhook_endpoints/{r.endpoint}", {"url": "https://evil.example/h"})],
    ),
    "webhook_endpoints_delete": ("object", lambda r, b: [Call("DELETE", f"/v1/webhook_endpoints/{r.endpoint}")]),
    "webhook_endpoints_rotate_secret": (
        "object",
        lambda r, b: [Call("POST", f"/v1/webhook_endpoints/{r.endpoint}/rotate_secret")],
    ),
    "webhook_deliveries_list": ("object", lambda r, b: [Call("GET", f"/v1/webhook_endpoints/{r.endpoint}/deliveries")]),
    "webhook_deliveries_redeliver": (
        "object",
        lambda r, b: [Call("POST", f"/v1/webhook_endpoints/{r.endpoint}/deliveries/{r.delivery}/redeliver")],
    ),
}


def _tool_using(secret: str, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Look up an order.",
        "effect": "read",
        "config": {
            "method": "GET",
            "url": "https://api.example.com/orders/{{args.n}}",
            "headers": {"Authorization": "Bearer {{secret." + secret + "}}"},
            "parameters": {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]},
        },
    }


_BOBS_AGENTS: dict[str, str] = {}


def _bobs_agent(bob: Tenant) -> str:
    return _BOBS_AGENTS[bob.project.pk]


def operations(client: Any) -> dict[str, tuple[str, str]]:
    """operationId -> (method, path template), from the served document."""
    doc = json.loads(client.get("/v1/openapi.json").content)
    return {
        op["operationId"]: (method.upper(), path)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    }


def snapshot(outside: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of the product's tables, except those of project `outside` (bob's own writes are his) and the
    columns that merely record use of a key."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for config in ("kagent", "agents", "tools", "runs"):
        for model in apps.get_app_config(config).get_models():
            queryset = model.objects.order_by("pk")
            names = {f.attname for f in model._meta.concrete_fields}
            if "project_id" in names:
                queryset = queryset.exclude(project_id=outside)
            values = list(queryset.values())
            for row in values:
                row.pop("last_used_at", None)
            rows[model._meta.label] = values
    return rows


def send(tenant: Tenant, key: str, call: Call) -> Any:
    client = tenant.client(key)
    headers = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in call.headers.items()}
    kwargs: dict[str, Any] = {**headers}
    if call.body is not None:
        kwargs.update(data=call.body, format="json")
    path = call.path
    if call.query:
        kwargs["QUERY_STRING"] = "&".join(f"{k}={v}" for k, v in call.query.items())
    return getattr(client, call.method.lower())(path, **kwargs)


def normalized(response: Any, refs: Refs) -> tuple[int, str]:
    text = response.content.decode()
    for name, value in sorted(refs.pairs().items(), key=lambda item: -len(item[1])):
        text = text.replace(value, f"<{name}>")
    # linear: literal key, one class; timestamps of the moment differ between two calls
    text = re.sub(r'"(updated_at|created_at)":[0-9]+', r'"\1":0', text)
    # linear: bounded classes; ids of what the call itself created
    text = re.sub(rf'"{ID_PATTERN}"', '"<new id>"', text)
    return response.status_code, text


def test_every_operation_has_a_sweep_probe(client):
    assert sorted(set(operations(client)) - set(KINDS)) == [], "operations without a probe in the tenant sweep"
    assert sorted(set(KINDS) - set(operations(client))) == [], "probes for operations the API no longer has"


@pytest.mark.parametrize("key_kind", ["secret", "publishable"])
def test_another_projects_key_learns_nothing_and_changes_nothing(world, key_kind, client):
    bob = make_tenant("bob")
    bob_api = bob.client()
    response = bob_api.post("/v1/agents", {"name": "bob agent"}, format="json")
    _BOBS_AGENTS[bob.project.pk] = response.json()["id"]
    key = bob.secret_key if key_kind == "secret" else bob.publishable_key
    foreign, nowhere = Refs.of(world), Refs.nowhere(world)
    ops = operations(client)
    before = snapshot(outside=bob.project.pk)
    problems: list[str] = []
    # Reads first, bob's own writes last: a name bob writes is his afterwards (a secret he puts is his to read).
    order = ("object", "list", "own", "reference", "name")
    for op_id, (kind, probe) in sorted(KINDS.items(), key=lambda item: (order.index(item[1][0]), item[0])):
        method, template = ops[op_id]
        for theirs, none in zip(probe(foreign, bob), probe(nowhere, bob), strict=True):
            assert theirs.method == method, (op_id, theirs.method)
            view = resolve(theirs.path).func.view_class  # type: ignore[attr-defined]
            refused = key_kind == "publishable" and not view.publishable_allowed
            answer = send(bob, key, theirs)
            body = answer.content.decode(errors="replace")
            sent = json.dumps([theirs.path, theirs.body, theirs.query, theirs.headers])
            leaked = [marker for marker in world.markers if marker in body and marker not in sent]
            if leaked:
                problems.append(f"{op_id} {theirs.path}: answer holds alice's {leaked}: {body[:300]}")
            if refused:
                if (answer.status_code, answer.json()["error"]["code"]) != (403, "publishable_key_not_allowed"):
                    problems.append(f"{op_id}: publishable key not refused: {answer.status_code} {body[:200]}")
                continue
            if kind in ("object", "reference", "name"):
                baseline = send(bob, key, none)
                if normalized(answer, foreign) != normalized(baseline, nowhere):
                    problems.append(
                        f"{op_id} {theirs.path}: alice's object answered unlike one of nowhere:\n"
                        f"  theirs  {normalized(answer, foreign)}\n  nowhere {normalized(baseline, nowhere)}"
                    )
                if kind == "object" and answer.status_code != 404:
                    problems.append(f"{op_id} {theirs.path}: {answer.status_code}, not 404: {body[:200]}")
                if kind == "reference" and answer.status_code < 400:
                    problems.append(f"{op_id}: a write naming alice's object succeeded: {body[:200]}")
            elif kind == "list":
                baseline = send(bob, key, none)
                if answer.status_code != 200 or normalized(answer, foreign) != normalized(baseline, nowhere):
                    problems.append(f"{op_id}: filtered by alice's objects unlike by none: {body[:200]}")
            elif kind == "own" and answer.status_code not in (200, 201):
                problems.append(f"{op_id}: {answer.status_code} {body[:200]}")
    assert problems == [], "\n".join(problems)
    assert snapshot(outside=bob.project.pk) == before, "a request with bob's key changed alice's rows"
    assert SECRET_NAME in world.markers
