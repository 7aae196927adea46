"""`/v1/agents…`: one API class per operation; each parses its body, calls one service or selector, renders."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from agents import selectors, services
from agents.models import KnowledgeSource
from agents.resources import AGENT, CHECK, CHECK_RUN, GREETING, KNOWLEDGE_SOURCE, METRICS, VERSION, VERSION_DIFF
from kagent.api import ProjectApi, paginate, param_time
from kagent.errors import Unprocessable
from kagent.inputs import UNSET, Input, is_set
from kagent.models import Project
from kagent.openapi import list_of
from runs import checks as run_checks
from runs import selectors as run_selectors
from tools.validation import RESPONSE_FIELD_SCHEMA


@dataclass(frozen=True)
class AgentWrite:
    name: str
    description: str | None
    config: dict[str, Any]
    actions_paused: bool
    traffic: list[dict[str, Any]] | None


TRAFFIC_SCHEMA: dict[str, Any] = {
    "type": ["array", "null"],
    "maxItems": 10,
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["version", "weight"],
        "properties": {
            "version": {"type": "integer", "minimum": 1},
            "weight": {"type": "integer", "minimum": 0, "maximum": 100},
        },
    },
    "description": "How runs that pin no version split over published versions: integer weights summing to 100, "
    "sticky per session and per end user; null clears it (the latest version). Applies at once.",
    "x-code": "invalid_traffic",
    "x-message": 'traffic is a list of {"version", "weight"} (integers), or null.',
}


AGENT_WRITE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "pattern": r"\S",  # linear: one character
                "x-message": "Give the agent a name.",
                "x-messages": {"maxLength": "The name can be at most 200 characters long."},
            },
            "description": {
                "type": ["string", "null"],
                "maxLength": 1000,
                "default": "",
                "x-message": "The description is text.",
                "x-messages": {"maxLength": "The description can be at most 1000 characters long."},
            },
            "config": {
                "type": "object",
                "default": {},
                "description": "The draft config (the AgentConfig schema). On PATCH, a JSON merge patch (RFC 7396) "
                "applied to the draft; the result is validated whole.",
                "x-code": "invalid_config",
                "x-message": "The agent's settings (config) must be a JSON object.",
            },
            "actions_paused": {
                "type": "boolean",
                "default": False,
                "description": "Emergency switch: applies at once to every version, without publishing.",
                "x-message": "actions_paused is true or false.",
            },
            "traffic": TRAFFIC_SCHEMA,
        },
    },
    AgentWrite,
)


@dataclass(frozen=True)
class RollbackInput:
    version: int


ROLLBACK = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["version"],
        "properties": {
            "version": {"type": "integer", "minimum": 1, "x-message": "version is the number of a published version."}
        },
    },
    RollbackInput,
)


@dataclass(frozen=True)
class PublishInput:
    note: str | None
    force: bool


PUBLISH = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "note": {
                "type": ["string", "null"],
                "maxLength": 1000,
                "default": "",
                "x-message": "The note is text of at most 1000 characters.",
            },
            "force": {
                "type": "boolean",
                "default": False,
                "description": "publish although checks fail (with a note saying why); the version records it",
                "x-message": "force is true or false.",
            },
        },
    },
    PublishInput,
)


_TEXT_LIST = {"type": "array", "maxItems": 20, "items": {"type": "string", "minLength": 1, "maxLength": 500}}
_NAME_LIST = {"type": "array", "maxItems": 20, "items": {"type": "string", "minLength": 1, "maxLength": 64}}


@dataclass(frozen=True)
class CheckWrite:
    name: str
    input: Any
    end_user: dict[str, Any] | None
    client_outputs: dict[str, Any]
    expect: dict[str, Any]
    from_run: str | None


CHECK_WRITE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "pattern": r"\S",  # linear: one character
                "x-message": "Give the check a name of at most 200 characters.",
            },
            "input": {
                "anyOf": [
                    {"type": "string", "minLength": 1, "maxLength": 20000},
                    {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 10,
                        "items": {"type": "string", "minLength": 1, "maxLength": 20000},
                    },
                ],
                "x-message": "input is the customer's message, or a list of 1 to 10 of them.",
            },
            "end_user": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "required": ["external_id"],
                "properties": {
                    "external_id": {"type": "string", "minLength": 1, "maxLength": 200},
                    "traits": {"type": "object", "maxProperties": 20},
                },
                "x-message": 'end_user is {"external_id", "traits"} or null.',
            },
            "client_outputs": {
                "type": "object",
                "maxProperties": 32,
                "default": {},
                "description": "{client tool name: the output the app would give}",
                "x-message": "client_outputs is a JSON object of at most 32 client tool names and their outputs.",
            },
            "expect": {
                "type": "object",
                "additionalProperties": False,
                "default": {},
                "properties": {
                    "tools_called": _NAME_LIST,
                    "tools_not_called": _NAME_LIST,
                    "output_contains": _TEXT_LIST,
                    "output_not_contains": _TEXT_LIST,
                    "status": {"enum": ["completed", "failed", "requires_action", "cancelled"]},
                },
                "x-message": "expect is {tools_called, tools_not_called, output_contains, output_not_contains, "
                "status}.",
            },
            "from_run": {
                "type": "string",
                "maxLength": 100,
                "description": "make the check from a run of this agent: its input, end user and the tools it called",
                "x-message": "from_run is the id of a run of this agent.",
            },
        },
    },
    CheckWrite,
)


def check_fields(agent: Any, body: CheckWrite, *, creating: bool) -> dict[str, Any]:
    """The check's fields from the body; with `from_run`, made from that run, what the body gives besides winning."""
    keys = ("name", "input", "end_user", "client_outputs", "expect")
    given = {key: getattr(body, key) for key in keys if is_set(getattr(body, key))}
    if is_set(body.from_run) and body.from_run is not None:
        made = run_checks.check_from_run(agent=agent, run_id=body.from_run, name=given.get("name"))
        return {**made, **{key: value for key, value in given.items() if value is not None}}
    if creating:
        for key in ("name", "input"):
            if given.get(key) is None:
                message = f"{key} is required (or from_run)."
                raise Unprocessable("invalid_request", message, details=[{"path": f"$.{key}", "message": message}])
    return given


@dataclass(frozen=True)
class CheckRunInput:
    version: int | None


CHECK_RUN_INPUT = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "version": {
                "type": ["integer", "null"],
                "minimum": 1,
                "description": "a published version to check; default (null) the draft",
                "x-message": "version is the number of a published version, or null for the draft.",
            }
        },
    },
    CheckRunInput,
)


class AgentListCreateApi(ProjectApi):
    @extend_schema(operation_id="agents_list", responses=list_of(AGENT.ref))
    def get(self, request: Request) -> Response:
        return Response(paginate(request, selectors.agent_list(project=self.project), AGENT.render))

    @extend_schema(operation_id="agents_create", request=AGENT_WRITE.body, responses={201: AGENT.ref})
    def post(self, request: Request) -> Response:
        body = AGENT_WRITE.parse(request.data)
        if body.traffic is not None:
            message = "a new agent has no published versions to split traffic over: set traffic after publishing"
            raise Unprocessable(
                "invalid_traffic", f"$.traffic: {message}", details=[{"path": "$.traffic", "message": message}]
            )
        agent = services.agent_create(
            project=self.project,
            name=body.name,
            description=body.description,
            config=body.config,
            actions_paused=body.actions_paused,
        )
        return Response(AGENT.render(agent), status=status.HTTP_201_CREATED)


class AgentDetailApi(ProjectApi):
    @extend_schema(operation_id="agents_retrieve", responses={200: AGENT.ref})
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(AGENT.render(selectors.agent_get(project=self.project, agent_id=agent_id)))

    @extend_schema(operation_id="agents_update", request=AGENT_WRITE.body, responses={200: AGENT.ref})
    def patch(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        body = AGENT_WRITE.parse(request.data, partial=True)
        agent = services.agent_update(
            agent=agent,
            name=body.name,
            description=body.description,
            config_patch=body.config,
            actions_paused=body.actions_paused,
            traffic=body.traffic,
        )
        return Response(AGENT.render(agent))

    @extend_schema(operation_id="agents_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        services.agent_delete(agent=agent)
        return Response({"id": agent.id, "object": "agent", "deleted": True})


class AgentGreetingApi(ProjectApi):
    # The chat widget asks for it when a customer opens the chat: a publishable key may (it is public words).
    publishable_allowed = True

    @extend_schema(
        operation_id="agents_greeting",
        description="The greeting of the agent's published version (the one most traffic goes to), for a chat "
        "to show before the customer writes. A publishable key may read it. 409 `not_published` before the first "
        "publish.",
        responses={200: GREETING.ref},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(GREETING.render(selectors.greeting_version(agent=agent)))


class AgentPublishApi(ProjectApi):
    @extend_schema(
        operation_id="agents_publish",
        request=PUBLISH.body,
        responses={201: VERSION.ref},
        description="Runs the agent's checks on the draft first (concurrently) and answers when they are done: a "
        "failure is 409 checks_failed naming the failing checks and why, unless force is true (with a note); the "
        "version then records forced and the failures.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        body = PUBLISH.parse(request.data or {})
        version = run_checks.publish_checked(agent=agent, note=body.note, force=body.force)
        return Response(VERSION.render(version), status=status.HTTP_201_CREATED)


class AgentCheckListCreateApi(ProjectApi):
    @extend_schema(operation_id="agents_checks_list", responses=list_of(CHECK.ref))
    def get(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(paginate(request, selectors.check_list(agent=agent), CHECK.render))

    @extend_schema(
        operation_id="agents_checks_create",
        request=CHECK_WRITE.body,
        responses={201: CHECK.ref},
        description=f"At most {run_checks.MAX_CHECKS} checks an agent (422 too_many_checks).",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        body = CHECK_WRITE.parse(request.data, partial=True)
        check = run_checks.check_create(agent=agent, fields=check_fields(agent, body, creating=True))
        return Response(CHECK.render(check), status=status.HTTP_201_CREATED)


class AgentCheckDetailApi(ProjectApi):
    @extend_schema(operation_id="agents_checks_retrieve", responses={200: CHECK.ref})
    def get(self, request: Request, agent_id: str, check_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(CHECK.render(selectors.check_get(agent=agent, check_id=check_id)))

    @extend_schema(operation_id="agents_checks_update", request=CHECK_WRITE.body, responses={200: CHECK.ref})
    def patch(self, request: Request, agent_id: str, check_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        check = selectors.check_get(agent=agent, check_id=check_id)
        body = CHECK_WRITE.parse(request.data, partial=True)
        return Response(
            CHECK.render(services.check_update(check=check, fields=check_fields(agent, body, creating=False)))
        )

    @extend_schema(operation_id="agents_checks_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, agent_id: str, check_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        check = selectors.check_get(agent=agent, check_id=check_id)
        check.delete()
        return Response({"id": check_id, "object": "check", "deleted": True})


class AgentCheckRunCreateApi(ProjectApi):
    @extend_schema(
        operation_id="agents_checks_run",
        request=CHECK_RUN_INPUT.body,
        responses={201: CHECK_RUN.ref},
        description="Runs every check of the agent in the sandbox against the draft (or a published version) and "
        "answers at once with the check run (status running); follow it at /v1/agents/{id}/check_runs/{rid}.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        body = CHECK_RUN_INPUT.parse(request.data or {})
        check_run = run_checks.check_run_start(agent=agent, version=body.version)
        return Response(CHECK_RUN.render(check_run), status=status.HTTP_201_CREATED)


class AgentCheckRunDetailApi(ProjectApi):
    @extend_schema(operation_id="agents_check_runs_retrieve", responses={200: CHECK_RUN.ref})
    def get(self, request: Request, agent_id: str, check_run_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(CHECK_RUN.render(selectors.check_run_get(agent=agent, check_run_id=check_run_id)))


class AgentRollbackApi(ProjectApi):
    @extend_schema(
        operation_id="agents_rollback",
        request=ROLLBACK.body,
        responses={200: AGENT.ref},
        description="All traffic to this published version at once: the split becomes that one version.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        body = ROLLBACK.parse(request.data)
        return Response(AGENT.render(services.agent_rollback(agent=agent, version=body.version)))


class AgentVersionMetricsApi(ProjectApi):
    @extend_schema(
        operation_id="agents_versions_metrics",
        parameters=[OpenApiParameter("since", str, description="Unix seconds or an ISO date; default 7 days ago")],
        responses={200: METRICS.ref},
    )
    def get(self, request: Request, agent_id: str, number: int) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        version = selectors.version_get(agent=agent, number=number)
        since = param_time(request.query_params, "since") or timezone.now() - timedelta(
            days=run_selectors.METRICS_DEFAULT_DAYS
        )
        return Response(METRICS.render(run_selectors.version_metrics(agent=agent, version=version, since=since)))


class AgentVersionListApi(ProjectApi):
    @extend_schema(operation_id="agents_versions_list", responses=list_of(VERSION.ref))
    def get(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(paginate(request, selectors.version_list(agent=agent), VERSION.render))


class AgentVersionDetailApi(ProjectApi):
    @extend_schema(operation_id="agents_versions_retrieve", responses={200: VERSION.ref})
    def get(self, request: Request, agent_id: str, number: int) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(VERSION.render(selectors.version_get(agent=agent, number=number)))


class AgentVersionDiffApi(ProjectApi):
    @extend_schema(operation_id="agents_versions_diff", responses={200: VERSION_DIFF.ref})
    def get(self, request: Request, agent_id: str, number: int, other: int) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(VERSION_DIFF.render(selectors.version_diff(agent=agent, before=number, after=other)))


class AgentVersionRestoreApi(ProjectApi):
    @extend_schema(
        operation_id="agents_versions_restore",
        request=None,
        responses={200: AGENT.ref},
        description="The draft becomes this version's config again; publish to make it live. HTTP tool definitions "
        "belong to the project and are not restored.",
    )
    def post(self, request: Request, agent_id: str, number: int) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        version = selectors.version_get(agent=agent, number=number)
        return Response(AGENT.render(services.agent_restore_version(agent=agent, version=version)))


# --- knowledge ----------------------------------------------------------------------------------------------------

MAX_KNOWLEDGE_CONTENT = 100_000


@dataclass(frozen=True)
class KnowledgeSourceWrite:
    agent: str | None
    title: str
    kind: str
    content: str | None
    url: str | None
    response: dict[str, Any] | None
    refresh_minutes: int | None
    searchable: bool


_RESPONSE_MESSAGE = (
    "response is {items_path, fields: [{path, label}] (1 to 12), max_items (1 to 1000)}: which rows of the JSON "
    "become passages and which of their fields, with labels."
)

KNOWLEDGE_SOURCE_WRITE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["title"],
        "properties": {
            "agent": {
                "type": ["string", "null"],
                "default": None,
                "description": "the agent that searches it; null: every agent of the project. Set on create only.",
                "x-message": "agent is the id of an agent of this project, or null.",
            },
            "title": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "pattern": r"\S",  # linear: one character
                "x-message": "Give the source a title of at most 200 characters.",
            },
            "kind": {
                "enum": ["text", "api"],
                "default": "text",
                "description": "text: Markdown written here; api: JSON fetched from `url`. Set on create only.",
                "x-message": "kind is text or api.",
            },
            "content": {
                "type": ["string", "null"],
                "minLength": 1,
                "maxLength": MAX_KNOWLEDGE_CONTENT,
                "pattern": r"\S",  # linear: one character
                "default": None,
                "description": "text sources: Markdown, split into passages by headings and paragraphs",
                "x-message": f"Write the content: text of at most {MAX_KNOWLEDGE_CONTENT:,} characters.",
            },
            "url": {
                "type": ["string", "null"],
                "minLength": 1,
                "maxLength": 2048,
                "default": None,
                "description": "api sources: https://host[:443|8443]/path, fetched (GET, signed like tool calls) "
                "through the outbound client",
                "x-code": "invalid_url",
                "x-message": "Give the URL to fetch: an https:// address of at most 2048 characters.",
            },
            "response": {
                "type": ["object", "null"],
                "default": None,
                "additionalProperties": False,
                "required": ["fields"],
                "properties": {
                    "items_path": {"type": "string", "maxLength": 200},
                    "fields": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 12,
                        "items": RESPONSE_FIELD_SCHEMA,
                    },
                    "max_items": {"type": "integer", "minimum": 1, "maximum": 1000},
                },
                "description": "api sources: which rows and fields of the JSON become passages",
                "x-message": _RESPONSE_MESSAGE,
            },
            "refresh_minutes": {
                "type": ["integer", "null"],
                "minimum": 15,
                "maximum": 10080,
                "default": None,
                "description": "api sources: minutes between fetches, 15 to 10080 (a week); default 60",
                "x-message": "Refresh it every so many minutes: a whole number from 15 to 10080 (a week).",
            },
            "searchable": {"type": "boolean", "default": True, "x-message": "searchable is true or false."},
        },
    },
    KnowledgeSourceWrite,
)
_CREATE_ONLY = ("agent", "kind")


def knowledge_source_create(project: Project, body: KnowledgeSourceWrite) -> KnowledgeSource:
    """A parsed write made a new source (here and on the dashboard's knowledge page)."""
    agent = selectors.agent_get(project=project, agent_id=body.agent) if body.agent is not None else None
    return services.knowledge_source_create(
        project=project,
        agent=agent,
        title=body.title,
        kind=body.kind,
        content=body.content,
        url=body.url,
        response=body.response,
        refresh_minutes=body.refresh_minutes,
        searchable=body.searchable,
    )


def knowledge_source_update(source: KnowledgeSource, body: KnowledgeSourceWrite) -> KnowledgeSource:
    """A parsed partial write applied to `source`: what it sets changes, the rest stays."""
    for name in _CREATE_ONLY:
        if is_set(getattr(body, name)):
            raise Unprocessable(
                "invalid_request",
                f"{name} is set when a source is created; create a new source instead.",
                details=[{"path": f"$.{name}", "message": "can't be changed"}],
            )
    return services.knowledge_source_update(
        source=source,
        title=body.title,
        content=body.content if body.content is not None else UNSET,
        url=body.url if body.url is not None else UNSET,
        response=body.response if body.response is not None else UNSET,
        refresh_minutes=body.refresh_minutes if body.refresh_minutes is not None else UNSET,
        searchable=body.searchable,
    )


class KnowledgeSourceListCreateApi(ProjectApi):
    @extend_schema(operation_id="knowledge_sources_list", responses=list_of(KNOWLEDGE_SOURCE.ref))
    def get(self, request: Request) -> Response:
        sources = selectors.knowledge_source_list(project=self.project)
        return Response(paginate(request, sources, KNOWLEDGE_SOURCE.render))

    @extend_schema(
        operation_id="knowledge_sources_create",
        request=KNOWLEDGE_SOURCE_WRITE.body,
        responses={201: KNOWLEDGE_SOURCE.ref},
    )
    def post(self, request: Request) -> Response:
        source = knowledge_source_create(self.project, KNOWLEDGE_SOURCE_WRITE.parse(request.data))
        return Response(KNOWLEDGE_SOURCE.render(source), status=status.HTTP_201_CREATED)


class KnowledgeSourceDetailApi(ProjectApi):
    @extend_schema(operation_id="knowledge_sources_retrieve", responses={200: KNOWLEDGE_SOURCE.ref})
    def get(self, request: Request, source_id: str) -> Response:
        return Response(
            KNOWLEDGE_SOURCE.render(selectors.knowledge_source_get(project=self.project, source_id=source_id))
        )

    @extend_schema(
        operation_id="knowledge_sources_update",
        request=KNOWLEDGE_SOURCE_WRITE.body,
        responses={200: KNOWLEDGE_SOURCE.ref},
        description="Change title, content (text), url, response, refresh_minutes (api) or searchable. "
        "agent and kind are set on create only.",
    )
    def patch(self, request: Request, source_id: str) -> Response:
        source = selectors.knowledge_source_get(project=self.project, source_id=source_id)
        source = knowledge_source_update(source, KNOWLEDGE_SOURCE_WRITE.parse(request.data, partial=True))
        return Response(KNOWLEDGE_SOURCE.render(source))

    @extend_schema(operation_id="knowledge_sources_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, source_id: str) -> Response:
        source = selectors.knowledge_source_get(project=self.project, source_id=source_id)
        services.knowledge_source_delete(source=source)
        return Response({"id": source_id, "object": "knowledge_source", "deleted": True})


class KnowledgeSourceRefreshApi(ProjectApi):
    @extend_schema(
        operation_id="knowledge_sources_refresh",
        request=None,
        responses={202: KNOWLEDGE_SOURCE.ref},
        description="Fetch an api source now (a worker does it; `fetch` shows the outcome). 409 not_refreshable "
        "for text sources.",
    )
    def post(self, request: Request, source_id: str) -> Response:
        source = selectors.knowledge_source_get(project=self.project, source_id=source_id)
        source = services.knowledge_source_refresh(source=source)
        return Response(KNOWLEDGE_SOURCE.render(source), status=status.HTTP_202_ACCEPTED)
