"""`/v1/tools…`: HTTP tool definitions. Each operation parses its body, calls one service or selector, renders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from kagent.api import ProjectApi, paginate
from kagent.inputs import Input
from kagent.openapi import list_of
from tools import selectors, services
from tools.mcp_validation import MCP_SERVER_NAME_MESSAGE, MCP_SERVER_NAME_RE
from tools.resources import HTTP_TOOL, MCP_SERVER, TOOL_PREVIEW, TOOL_TEST_CALL
from tools.template_values import EndUserIdentity
from tools.validation import HTTP_TOOL_NAME_RE, TOOL_NAME_MESSAGE


@dataclass(frozen=True)
class HttpToolWrite:
    name: str
    description: str
    effect: str
    requires_verified_user: bool
    config: dict[str, Any]


# The envelope only: the definition's own rules (templating, identity, hosts, secrets) are the service's, with
# one 422 code each (tools/validation.py).
HTTP_TOOL_WRITE = Input(
    {
        "type": "object",
        "x-code": "invalid_tool",
        "additionalProperties": False,
        "required": ["name", "description", "effect", "config"],
        "properties": {
            "name": {
                "type": "string",
                "pattern": HTTP_TOOL_NAME_RE.pattern,
                "x-code": "invalid_tool_name",
                "x-message": TOOL_NAME_MESSAGE,
            },
            "description": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1000,
                "x-message": "Describe what the tool does, in at most 1000 characters: the model reads it to know "
                "when to call it.",
            },
            "effect": {"enum": ["read", "action"], "x-message": "The effect is read or action."},
            "requires_verified_user": {
                "type": "boolean",
                "default": False,
                "x-message": "requires_verified_user is true or false.",
            },
            "config": {
                "type": "object",
                "x-message": "The call's settings (config) are a JSON object.",
                "description": "An HttpToolConfig. On PATCH, a JSON merge patch (RFC 7396) applied to the config; "
                "the result is validated whole.",
            },
        },
    },
    HttpToolWrite,
)


class ToolListCreateApi(ProjectApi):
    @extend_schema(operation_id="tools_list", responses=list_of(HTTP_TOOL.ref))
    def get(self, request: Request) -> Response:
        return Response(paginate(request, selectors.http_tool_list(project=self.project), HTTP_TOOL.render))

    @extend_schema(operation_id="tools_create", request=HTTP_TOOL_WRITE.body, responses={201: HTTP_TOOL.ref})
    def post(self, request: Request) -> Response:
        body = HTTP_TOOL_WRITE.parse(request.data)
        tool = services.http_tool_create(
            project=self.project,
            name=body.name,
            description=body.description,
            effect=body.effect,
            requires_verified_user=body.requires_verified_user,
            config=body.config,
        )
        return Response(HTTP_TOOL.render(tool), status=status.HTTP_201_CREATED)


class ToolDetailApi(ProjectApi):
    @extend_schema(operation_id="tools_retrieve", responses={200: HTTP_TOOL.ref})
    def get(self, request: Request, name: str) -> Response:
        return Response(HTTP_TOOL.render(selectors.http_tool_get(project=self.project, name=name)))

    @extend_schema(operation_id="tools_update", request=HTTP_TOOL_WRITE.body, responses={200: HTTP_TOOL.ref})
    def patch(self, request: Request, name: str) -> Response:
        tool = selectors.http_tool_get(project=self.project, name=name)
        body = HTTP_TOOL_WRITE.parse(request.data, partial=True)
        tool = services.http_tool_update(
            tool=tool,
            name=body.name,
            description=body.description,
            effect=body.effect,
            requires_verified_user=body.requires_verified_user,
            config_patch=body.config,
        )
        return Response(HTTP_TOOL.render(tool))

    @extend_schema(operation_id="tools_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, name: str) -> Response:
        tool = selectors.http_tool_get(project=self.project, name=name)
        tool_id = tool.id
        services.http_tool_delete(tool=tool, granted_by=selectors.agents_granting_tool(project=self.project, name=name))
        return Response({"id": tool_id, "object": "tool", "name": name, "deleted": True})


# --- preview and test call --------------------------------------------------------------------------------------

_SAMPLE_PROPERTIES: dict[str, Any] = {
    "arguments": {
        "type": "object",
        "default": {},
        "description": "sample arguments, as the model would send them",
        "x-code": "invalid_sample",
        "x-message": "arguments is an object of sample arguments.",
    },
    "end_user": {
        "type": ["object", "null"],
        "default": None,
        "additionalProperties": False,
        "required": ["external_id"],
        "properties": {
            "external_id": {"type": "string", "minLength": 1, "maxLength": 255},
            "traits": {"type": "object", "default": {}},
        },
        "description": "a sample verified end user for {{end_user.*}}; null: an anonymous one",
        "x-code": "invalid_sample",
        "x-message": 'end_user is {"external_id": …, "traits": {…}} or null.',
    },
    "variables": {
        "type": "object",
        "default": {},
        "additionalProperties": {"type": "string", "maxLength": 1000},
        "description": "sample agent variables for {{var.*}}",
        "x-code": "invalid_sample",
        "x-message": "variables is an object of strings.",
    },
}


@dataclass(frozen=True)
class ToolSampleInput:
    arguments: dict[str, Any]
    end_user: dict[str, Any] | None
    variables: dict[str, str]

    def sample(self) -> services.ToolSample:
        end_user = self.end_user
        identity = EndUserIdentity(end_user["external_id"], end_user.get("traits") or {}) if end_user else None
        return services.ToolSample(arguments=self.arguments, end_user=identity, variables=self.variables)


TOOL_SAMPLE = Input(
    {"type": "object", "additionalProperties": False, "x-code": "invalid_sample", "properties": _SAMPLE_PROPERTIES},
    ToolSampleInput,
)


@dataclass(frozen=True)
class ToolDraftSampleInput(ToolSampleInput):
    tool: dict[str, Any]


TOOL_DRAFT_SAMPLE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "x-code": "invalid_sample",
        "required": ["tool"],
        "properties": {
            "tool": {
                "type": "object",
                "description": "an HTTP tool definition not yet saved (as for POST /v1/tools), checked as a write "
                "would check it",
                "x-code": "invalid_tool",
                "x-message": "tool is an HTTP tool definition: {name, description, effect, config, …}.",
            },
            **_SAMPLE_PROPERTIES,
        },
    },
    ToolDraftSampleInput,
)


class ToolPreviewApi(ProjectApi):
    @extend_schema(operation_id="tools_preview", request=TOOL_SAMPLE.body, responses={200: TOOL_PREVIEW.ref})
    def post(self, request: Request, name: str) -> Response:
        tool = selectors.http_tool_get(project=self.project, name=name)
        body = TOOL_SAMPLE.parse(request.data or {})
        preview = services.http_tool_preview(project=self.project, definition=tool.definition(), sample=body.sample())
        return Response(TOOL_PREVIEW.render(preview))


class ToolTestCallApi(ProjectApi):
    @extend_schema(operation_id="tools_test", request=TOOL_SAMPLE.body, responses={200: TOOL_TEST_CALL.ref})
    def post(self, request: Request, name: str) -> Response:
        tool = selectors.http_tool_get(project=self.project, name=name)
        body = TOOL_SAMPLE.parse(request.data or {})
        outcome = services.http_tool_test_call(project=self.project, definition=tool.definition(), sample=body.sample())
        return Response(TOOL_TEST_CALL.render(outcome))


class ToolDraftPreviewApi(ProjectApi):
    @extend_schema(
        operation_id="tool_drafts_preview", request=TOOL_DRAFT_SAMPLE.body, responses={200: TOOL_PREVIEW.ref}
    )
    def post(self, request: Request) -> Response:
        body = TOOL_DRAFT_SAMPLE.parse(request.data)
        definition = services.http_tool_check(project=self.project, definition=body.tool)
        preview = services.http_tool_preview(project=self.project, definition=definition, sample=body.sample())
        return Response(TOOL_PREVIEW.render(preview))


class ToolDraftTestCallApi(ProjectApi):
    @extend_schema(operation_id="tool_drafts_test", request=TOOL_DRAFT_SAMPLE.body, responses={200: TOOL_TEST_CALL.ref})
    def post(self, request: Request) -> Response:
        body = TOOL_DRAFT_SAMPLE.parse(request.data)
        definition = services.http_tool_check(project=self.project, definition=body.tool)
        outcome = services.http_tool_test_call(project=self.project, definition=definition, sample=body.sample())
        return Response(TOOL_TEST_CALL.render(outcome))


# --- MCP servers ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class McpServerWrite:
    name: str
    url: str
    headers: dict[str, str]


# The envelope only: the URL, header and secret rules are the service's (tools/mcp_validation.py).
MCP_SERVER_WRITE = Input(
    {
        "type": "object",
        "x-code": "invalid_mcp_server",
        "additionalProperties": False,
        "required": ["name", "url"],
        "properties": {
            "name": {
                "type": "string",
                "pattern": MCP_SERVER_NAME_RE.pattern,
                "x-code": "invalid_mcp_server_name",
                "x-message": MCP_SERVER_NAME_MESSAGE,
            },
            "url": {
                "type": "string",
                "minLength": 1,
                "maxLength": 2048,
                "description": "https://host[:port]/path",
                "x-message": "Give the server's URL: https://, at most 2048 characters.",
            },
            "headers": {
                "type": "object",
                "default": {},
                "maxProperties": 20,
                "additionalProperties": {"type": "string", "maxLength": 2048},
                "x-message": "The headers are a JSON object of at most 20 names and values (each value at most "
                "2048 characters).",
                "description": "sent with every request; secrets as {{secret.NAME}}, under the secret's "
                "allowed_hosts. On PATCH, replaces the headers whole.",
            },
        },
    },
    McpServerWrite,
)


class McpServerListCreateApi(ProjectApi):
    @extend_schema(operation_id="mcp_servers_list", responses=list_of(MCP_SERVER.ref))
    def get(self, request: Request) -> Response:
        return Response(paginate(request, selectors.mcp_server_list(project=self.project), MCP_SERVER.render))

    @extend_schema(
        operation_id="mcp_servers_create",
        request=MCP_SERVER_WRITE.body,
        responses={201: MCP_SERVER.ref},
        description="Lists the server's tools first: a server that can't be listed is refused (422 mcp_unreachable, "
        "details.code saying why) and nothing is saved.",
    )
    def post(self, request: Request) -> Response:
        body = MCP_SERVER_WRITE.parse(request.data)
        server = services.mcp_server_create(project=self.project, name=body.name, url=body.url, headers=body.headers)
        return Response(MCP_SERVER.render(server), status=status.HTTP_201_CREATED)


class McpServerDetailApi(ProjectApi):
    @extend_schema(operation_id="mcp_servers_retrieve", responses={200: MCP_SERVER.ref})
    def get(self, request: Request, server_id: str) -> Response:
        return Response(MCP_SERVER.render(selectors.mcp_server_get(project=self.project, server_id=server_id)))

    @extend_schema(
        operation_id="mcp_servers_update",
        request=MCP_SERVER_WRITE.body,
        responses={200: MCP_SERVER.ref},
        description="Lists the tools again with the new settings; refused (nothing saved) when that fails.",
    )
    def patch(self, request: Request, server_id: str) -> Response:
        server = selectors.mcp_server_get(project=self.project, server_id=server_id)
        body = MCP_SERVER_WRITE.parse(request.data, partial=True)
        server = services.mcp_server_update(
            server=server,
            name=body.name,
            url=body.url,
            headers=body.headers,
            granted_by=lambda: selectors.agents_granting_mcp_server(project=self.project, name=server.name),
        )
        return Response(MCP_SERVER.render(server))

    @extend_schema(operation_id="mcp_servers_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, server_id: str) -> Response:
        server = selectors.mcp_server_get(project=self.project, server_id=server_id)
        services.mcp_server_delete(
            server=server, granted_by=selectors.agents_granting_mcp_server(project=self.project, name=server.name)
        )
        return Response({"id": server_id, "object": "mcp_server", "deleted": True})


class McpServerRefreshApi(ProjectApi):
    @extend_schema(
        operation_id="mcp_servers_refresh",
        request=None,
        responses={200: MCP_SERVER.ref},
        description="Lists the tools again. On failure the previous listing is kept and last_error says why.",
    )
    def post(self, request: Request, server_id: str) -> Response:
        server = selectors.mcp_server_get(project=self.project, server_id=server_id)
        return Response(MCP_SERVER.render(services.mcp_server_refresh(server=server)))
