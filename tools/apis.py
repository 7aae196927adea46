"""`/v1/tools…`: HTTP tool definitions."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from kagent.api import ProjectApi, paginate, request_object, unix
from kagent.openapi import TIMESTAMP, component, json_body, list_of
from tools import selectors, services
from tools.models import HttpTool

TOOL_FIELDS: dict[str, Any] = {
    "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,29}$"},
    "description": {"type": "string", "maxLength": 1000},
    "effect": {"enum": ["read", "action"]},
    "requires_verified_user": {"type": "boolean"},
    "config": {
        "type": "object",
        "properties": {
            "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]},
            "url": {"type": "string", "description": "Literal https://host[:port]/ then a templated path and query"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "body": {"type": "object", "description": "JSON object template (POST, PUT, PATCH)"},
            "parameters": {"type": "object", "description": "JSON Schema of the arguments (at most 8)"},
            "response": {"type": "object"},
            "timeout_ms": {"type": "integer", "maximum": 15000},
        },
    },
}
TOOL_SCHEMA = component(
    "HttpTool",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string", "example": "tool_01j…"},
            "object": {"const": "tool"},
            **TOOL_FIELDS,
            "created_at": TIMESTAMP,
            "updated_at": TIMESTAMP,
        },
    },
)
TOOL_WRITE = json_body({"type": "object", "properties": TOOL_FIELDS})


def render_tool(tool: HttpTool) -> dict[str, Any]:
    return {
        "id": tool.id,
        "object": "tool",
        "name": tool.name,
        "description": tool.description,
        "effect": tool.effect,
        "requires_verified_user": tool.requires_verified_user,
        "config": tool.config,
        "created_at": unix(tool.created_at),
        "updated_at": unix(tool.updated_at),
    }


class ToolListCreateApi(ProjectApi):
    @extend_schema(operation_id="tools_list", responses=list_of(TOOL_SCHEMA))
    def get(self, request: Request) -> Response:
        return Response(paginate(request, selectors.http_tool_list(project=self.project), render_tool))

    @extend_schema(operation_id="tools_create", request=TOOL_WRITE, responses={201: TOOL_SCHEMA})
    def post(self, request: Request) -> Response:
        tool = services.http_tool_create(project=self.project, data=request_object(request))
        return Response(render_tool(tool), status=status.HTTP_201_CREATED)


class ToolDetailApi(ProjectApi):
    @extend_schema(operation_id="tools_retrieve", responses={200: TOOL_SCHEMA})
    def get(self, request: Request, name: str) -> Response:
        return Response(render_tool(selectors.http_tool_get(project=self.project, name=name)))

    @extend_schema(operation_id="tools_update", request=TOOL_WRITE, responses={200: TOOL_SCHEMA})
    def patch(self, request: Request, name: str) -> Response:
        tool = selectors.http_tool_get(project=self.project, name=name)
        return Response(render_tool(services.http_tool_update(tool=tool, data=request_object(request))))

    @extend_schema(operation_id="tools_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, name: str) -> Response:
        tool = selectors.http_tool_get(project=self.project, name=name)
        tool_id = tool.id
        services.http_tool_delete(tool=tool)
        return Response({"id": tool_id, "object": "tool", "name": name, "deleted": True})
