"""`/v1/agents…`: one API class per operation; each parses, calls one service or selector, renders."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from agents import selectors, services
from agents.config import AGENT_CONFIG_SCHEMA
from agents.models import Agent, AgentVersion
from kagent.api import ProjectApi, paginate, request_object, unix
from kagent.openapi import TIMESTAMP, component, json_body, list_of

AGENT_CONFIG = component("AgentConfig", AGENT_CONFIG_SCHEMA)
AGENT_SCHEMA = component(
    "Agent",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string", "example": "agt_01j…"},
            "object": {"const": "agent"},
            "name": {"type": "string"},
            "description": {"type": "string"},
            "config": AGENT_CONFIG,
            "actions_paused": {"type": "boolean"},
            "latest_version": {"type": ["integer", "null"]},
            "created_at": TIMESTAMP,
            "updated_at": TIMESTAMP,
        },
    },
)
AGENT_WRITE_SCHEMA = json_body(
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 200},
            "description": {"type": "string", "maxLength": 1000},
            "config": AGENT_CONFIG,
            "actions_paused": {"type": "boolean"},
        },
    }
)
VERSION_SCHEMA = component(
    "AgentVersion",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string", "example": "ver_01j…"},
            "object": {"const": "agent_version"},
            "agent": {"type": "string"},
            "number": {"type": "integer"},
            "note": {"type": "string"},
            "config": AGENT_CONFIG,
            "http_tools": {"type": "object", "additionalProperties": {"type": "object"}},
            "builtin_versions": {"type": "object", "additionalProperties": {"type": "string"}},
            "created_at": TIMESTAMP,
        },
    },
)


def render_agent(agent: Agent) -> dict[str, Any]:
    return {
        "id": agent.id,
        "object": "agent",
        "name": agent.name,
        "description": agent.description,
        "config": agent.config,
        "actions_paused": agent.actions_paused,
        "latest_version": agent.latest_version_number,
        "created_at": unix(agent.created_at),
        "updated_at": unix(agent.updated_at),
    }


def render_version(version: AgentVersion) -> dict[str, Any]:
    return {
        "id": version.id,
        "object": "agent_version",
        "agent": version.agent_id,
        "number": version.number,
        "note": version.note,
        "config": version.config,
        "http_tools": version.http_tools,
        "builtin_versions": version.builtin_versions,
        "created_at": unix(version.created_at),
    }


class AgentListCreateApi(ProjectApi):
    @extend_schema(operation_id="agents_list", responses=list_of(AGENT_SCHEMA))
    def get(self, request: Request) -> Response:
        return Response(paginate(request, selectors.agent_list(project=self.project), render_agent))

    @extend_schema(operation_id="agents_create", request=AGENT_WRITE_SCHEMA, responses={201: AGENT_SCHEMA})
    def post(self, request: Request) -> Response:
        agent = services.agent_create(project=self.project, data=request_object(request))
        return Response(render_agent(agent), status=status.HTTP_201_CREATED)


class AgentDetailApi(ProjectApi):
    @extend_schema(operation_id="agents_retrieve", responses={200: AGENT_SCHEMA})
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(render_agent(selectors.agent_get(project=self.project, agent_id=agent_id)))

    @extend_schema(operation_id="agents_update", request=AGENT_WRITE_SCHEMA, responses={200: AGENT_SCHEMA})
    def patch(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(render_agent(services.agent_update(agent=agent, data=request_object(request))))

    @extend_schema(operation_id="agents_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        services.agent_delete(agent=agent)
        return Response({"id": agent.id, "object": "agent", "deleted": True})


class AgentPublishApi(ProjectApi):
    @extend_schema(
        operation_id="agents_publish",
        request=json_body({"type": "object", "properties": {"note": {"type": "string", "maxLength": 1000}}}),
        responses={201: VERSION_SCHEMA},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        body = request_object(request, allow_empty=True)
        version = services.agent_publish(agent=agent, note=body.get("note", ""))
        return Response(render_version(version), status=status.HTTP_201_CREATED)


class AgentVersionListApi(ProjectApi):
    @extend_schema(operation_id="agents_versions_list", responses=list_of(VERSION_SCHEMA))
    def get(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(paginate(request, selectors.version_list(agent=agent), render_version))


class AgentVersionDetailApi(ProjectApi):
    @extend_schema(operation_id="agents_versions_retrieve", responses={200: VERSION_SCHEMA})
    def get(self, request: Request, agent_id: str, number: int) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(render_version(selectors.version_get(agent=agent, number=number)))
