"""How HTTP tools, their previews and test calls look in the API (rendered and in the OpenAPI document)."""

from __future__ import annotations

from kagent.openapi import component
from kagent.rendering import Const, Field, Resource, Timestamp
from tools.definition_shape import TOOL_DEFINITION_SCHEMA
from tools.http_call import HttpCallOutcome
from tools.mcp_validation import MCP_SERVER_NAME_RE
from tools.models import HttpTool, McpServer
from tools.services import ToolPreview
from tools.validation import HTTP_TOOL_NAME_RE

HTTP_TOOL_CONFIG = component("HttpToolConfig", TOOL_DEFINITION_SCHEMA["properties"]["config"])

HTTP_TOOL: Resource[HttpTool] = Resource(
    "HttpTool",
    {
        "id": Field({"type": "string", "example": "tool_01j…"}, "pk"),
        "object": Const("tool"),
        "name": Field({"type": "string", "pattern": HTTP_TOOL_NAME_RE.pattern}, "name"),
        "description": Field({"type": "string", "maxLength": 1000}, "description"),
        "effect": Field({"enum": ["read", "action"]}, "effect"),
        "requires_verified_user": Field({"type": "boolean"}, "requires_verified_user"),
        "config": Field(HTTP_TOOL_CONFIG, "config"),
        "created_at": Timestamp("created_at"),
        "updated_at": Timestamp("updated_at"),
    },
)

_NULLABLE_STRING = {"type": ["string", "null"]}


def _ok(preview: ToolPreview) -> bool:
    return preview.error is None


TOOL_PREVIEW: Resource[ToolPreview] = Resource(
    "ToolPreview",
    {
        "object": Const("tool_preview"),
        "ok": Field({"type": "boolean", "description": "false: the tool would send nothing (see error)"}, _ok),
        "request": Field(
            {
                "type": ["object", "null"],
                "description": "the request the call would send; secret values masked",
                "required": ["method", "url", "headers", "body", "timeout_ms"],
                "properties": {
                    "method": {"type": "string"},
                    "url": {"type": "string"},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                    "body": _NULLABLE_STRING,
                    "timeout_ms": {"type": "integer"},
                },
            },
            "request",
        ),
        "error": Field(
            {
                "type": ["object", "null"],
                "description": "why nothing would be sent (fail-closed templating)",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "placeholder": {"type": "string"},
                    "parameter": {"type": "string"},
                },
            },
            "error",
        ),
    },
    description="Nothing is sent for a preview. Headers K-Agent adds to every call (the Standard Webhooks "
    "signature, User-Agent) are not shown.",
)


TOOL_TEST_CALL: Resource[HttpCallOutcome] = Resource(
    "ToolTestCall",
    {
        "object": Const("tool_test_call"),
        "ok": Field({"type": "boolean"}, lambda outcome: outcome.ok),
        "shown_to_model": Field(
            {
                "type": "object",
                "description": 'what the model would see: {"ok": true, "data": …} shaped by the response fields, or '
                '{"ok": false, "error": {"code", "guidance"}}',
            },
            "model_result",
        ),
        "upstream": Field(
            {
                "type": "object",
                "description": "what the run steps record and the model is not shown: method, host, path, status, "
                "body excerpt (secrets masked), duration, error code",
                "properties": {
                    "method": {"type": "string"},
                    "host": {"type": "string"},
                    "path": {"type": "string"},
                    "status": {"type": ["integer", "null"]},
                    "body_excerpt": {"type": "string"},
                    "duration_ms": {"type": "integer"},
                    "error_code": {"type": "string"},
                },
            },
            "step",
        ),
    },
    description="A live call through the hardened client, signed like a run's call; it appears in the egress log.",
)


MCP_SERVER: Resource[McpServer] = Resource(
    "McpServer",
    {
        "id": Field({"type": "string", "example": "mcp_01j…"}, "pk"),
        "object": Const("mcp_server"),
        "name": Field(
            {
                "type": "string",
                "pattern": MCP_SERVER_NAME_RE.pattern,
                "description": "the model sees each of its tools as <name>__<tool>",
            },
            "name",
        ),
        "url": Field({"type": "string", "description": "https only"}, "url"),
        "headers": Field(
            {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "header templates as written: secrets by name, {{secret.NAME}}",
            },
            "headers",
        ),
        "tools": Field(
            {
                "type": "array",
                "description": "the tools the server listed when last listed successfully",
                "items": {
                    "type": "object",
                    "required": ["name", "description", "input_schema", "grantable", "reason"],
                    "properties": {
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "input_schema": {"type": "object"},
                        "grantable": {"type": "boolean"},
                        "reason": {
                            "type": ["string", "null"],
                            "description": "why the tool can't be granted: its name as the model would see it, "
                            "a built-in's name, or an input schema outside the bounds for tenant schemas",
                        },
                    },
                },
            },
            "tools",
        ),
        "truncated": Field(
            {"type": "boolean", "description": "the server listed more tools than are kept"}, "truncated"
        ),
        "protocol_version": Field({"type": "string"}, "protocol_version"),
        "listed_at": Timestamp("listed_at", nullable=True, description="when the tools were last listed"),
        "last_error": Field(
            {
                "type": ["object", "null"],
                "description": "why the last refresh failed (the listing shown is the one before); null once a "
                "listing succeeds",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            },
            "last_error",
        ),
        "created_at": Timestamp("created_at"),
        "updated_at": Timestamp("updated_at"),
    },
)
