"""`/v1/agents…`: one API class per operation; each parses its body, calls one service or selector, renders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from agents import selectors, services
from agents.models import KnowledgeSource
from agents.resources import AGENT, GREETING, KNOWLEDGE_SOURCE, VERSION, VERSION_DIFF
from kagent.api import ProjectApi, paginate
from kagent.errors import Unprocessable
from kagent.inputs import UNSET, Input, is_set
from kagent.models import Project
from kagent.openapi import list_of
from tools.definition_shape import RESPONSE_FIELD_SCHEMA


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
