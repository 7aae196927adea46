"""How agents, their versions and knowledge sources look in the API (rendered and in the OpenAPI document)."""

from __future__ import annotations

from agents.config import AGENT_CONFIG_SCHEMA
from agents.models import Agent, AgentVersion, KnowledgeSource
from agents.selectors import VersionDiff
from kagent.openapi import component
from kagent.rendering import Const, Field, Resource, Timestamp

AGENT_CONFIG = component("AgentConfig", AGENT_CONFIG_SCHEMA)

AGENT: Resource[Agent] = Resource(
    "Agent",
    {
        "id": Field({"type": "string", "example": "agt_01j…"}, "pk"),
        "object": Const("agent"),
        "name": Field({"type": "string"}, "name"),
        "description": Field({"type": "string"}, "description"),
        "config": Field(AGENT_CONFIG, "config"),
        "actions_paused": Field({"type": "boolean"}, "actions_paused"),
        "latest_version": Field({"type": ["integer", "null"]}, "latest_version_number"),
        "created_at": Timestamp("created_at"),
        "updated_at": Timestamp("updated_at"),
    },
)

VERSION: Resource[AgentVersion] = Resource(
    "AgentVersion",
    {
        "id": Field({"type": "string", "example": "ver_01j…"}, "pk"),
        "object": Const("agent_version"),
        "agent": Field({"type": "string"}, "agent_id"),
        "number": Field({"type": "integer"}, "number"),
        "note": Field({"type": "string"}, "note"),
        "config": Field(AGENT_CONFIG, "config"),
        "http_tools": Field({"type": "object", "additionalProperties": {"type": "object"}}, "http_tools"),
        "builtin_versions": Field({"type": "object", "additionalProperties": {"type": "string"}}, "builtin_versions"),
        "created_at": Timestamp("created_at"),
    },
)

KNOWLEDGE_SOURCE: Resource[KnowledgeSource] = Resource(
    "KnowledgeSource",
    {
        "id": Field({"type": "string"}, "pk"),
        "object": Const("knowledge_source"),
        "agent": Field({"type": ["string", "null"], "description": "null: every agent of the project"}, "agent_id"),
        "title": Field({"type": "string"}, "title"),
        "kind": Field({"enum": ["text"]}, "kind"),
        "content": Field({"type": "string"}, "content"),
        "searchable": Field({"type": "boolean"}, "searchable"),
        "updated_at": Timestamp("updated_at"),
    },
)

VERSION_DIFF: Resource[VersionDiff] = Resource(
    "AgentVersionDiff",
    {
        "object": Const("agent_version_diff"),
        "agent": Field({"type": "string"}, lambda diff: diff.agent.pk),
        "from_version": Field({"type": "integer"}, "before"),
        "to_version": Field({"type": "integer"}, "after"),
        "changes": Field(
            {
                "type": "array",
                "description": "JSON paths under $.config and $.http_tools (tool grants and client tools are named "
                "by their tool: $.config.tools.http[order_status].rules)",
                "items": {
                    "type": "object",
                    "required": ["path", "change", "before", "after"],
                    "properties": {
                        "path": {"type": "string", "example": "$.config.tools.max_tool_rounds"},
                        "change": {"enum": ["added", "removed", "changed"]},
                        "before": {"description": "null when added"},
                        "after": {"description": "null when removed"},
                    },
                },
            },
            lambda diff: [
                {"path": c.path, "change": c.change, "before": c.before, "after": c.after} for c in diff.changes
            ],
        ),
    },
)
