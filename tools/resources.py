"""How HTTP tools look in the API (rendered and in the OpenAPI document)."""

from __future__ import annotations

from kagent.openapi import component
from kagent.rendering import Const, Field, Resource, Timestamp
from tools.models import HttpTool
from tools.validation import HTTP_TOOL_NAME_RE, TOOL_DEFINITION_SCHEMA

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
