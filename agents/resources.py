"""How agents, their versions and knowledge sources look in the API (rendered and in the OpenAPI document)."""

from __future__ import annotations

from typing import Any

from agents.config import AGENT_CONFIG_SCHEMA
from agents.models import Agent, AgentVersion, KnowledgeSource
from agents.selectors import VersionDiff
from kagent.egress import shown_code
from kagent.openapi import component
from kagent.rendering import Const, Field, Resource, Timestamp, unix

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
        "traffic": Field(
            {
                "type": ["array", "null"],
                "description": "how runs that pin no version split over published versions (null: the latest)",
                "items": {
                    "type": "object",
                    "properties": {"version": {"type": "integer"}, "weight": {"type": "integer"}},
                },
            },
            "traffic",
        ),
        "created_at": Timestamp("created_at"),
        "updated_at": Timestamp("updated_at"),
    },
)

# What the chat widget reads before a customer writes: the published greeting, nothing else of the agent (a
# publishable key may read it; it is meant for every visitor of the site).
GREETING: Resource[AgentVersion] = Resource(
    "AgentGreeting",
    {
        "object": Const("agent_greeting"),
        "agent": Field({"type": "string"}, lambda v: v.agent_id),
        "version": Field({"type": "integer", "description": "the published version it comes from"}, "number"),
        "greeting": Field(
            {"type": ["string", "null"], "description": "the agent's greeting; null when it has none"},
            lambda v: (v.config.get("greeting") or "").strip() or None,
        ),
    },
)

METRICS: Resource[dict[str, Any]] = Resource(
    "AgentVersionMetrics",
    {
        "object": Const("version_metrics"),
        "agent": Field({"type": "string"}, lambda m: m["agent"]),
        "version": Field({"type": "integer"}, lambda m: m["version"]),
        "since": Field({"type": "integer", "description": "Unix seconds"}, lambda m: m["since"]),
        "runs": Field({"type": "integer"}, lambda m: m["runs"]),
        "completed": Field({"type": "integer"}, lambda m: m["completed"]),
        "failed": Field({"type": "integer"}, lambda m: m["failed"]),
        "handoffs": Field(
            {"type": "integer", "description": "transfer_to_human calls that handed over"}, lambda m: m["handoffs"]
        ),
        "tool_failures": Field({"type": "integer"}, lambda m: m["tool_failures"]),
        "unverified_claims": Field(
            {"type": "integer", "description": "completed runs whose answer kept a claim no tool confirmed"},
            lambda m: m["unverified_claims"],
        ),
        "p50_ms": Field(
            {"type": ["integer", "null"], "description": "median time to a completed answer"}, lambda m: m["p50_ms"]
        ),
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
        "mcp_tools": Field(
            {
                "type": "object",
                "additionalProperties": {"type": "object"},
                "description": "`<server>__<tool>` -> the granted MCP tool as listed when published, with its "
                "server's URL and headers (secrets by name)",
            },
            "mcp_tools",
        ),
        "builtin_versions": Field({"type": "object", "additionalProperties": {"type": "string"}}, "builtin_versions"),
        "forced": Field({"type": "boolean", "description": "published with force although checks failed"}, "forced"),
        "check_failures": Field({"type": "array", "items": {"type": "object"}}, "check_failures"),
        "created_at": Timestamp("created_at"),
    },
)

KNOWLEDGE_RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "How the API's JSON becomes passages, like an HTTP tool's `response`: the rows at "
    "`items_path`, of each only the `fields` listed, with their labels. With two fields or more, the first field's "
    "value is the row's heading (a question, a product's name).",
    "properties": {
        "items_path": {"type": "string"},
        "fields": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "label"],
                "properties": {"path": {"type": "string"}, "label": {"type": "string"}},
            },
        },
        "max_items": {"type": "integer"},
    },
}


def _fetch(source: KnowledgeSource) -> dict[str, Any] | None:
    if source.kind != KnowledgeSource.Kind.API:
        return None
    return {
        "status": source.last_fetch_status or None,
        "at": unix(source.last_fetch_at),
        "error_code": shown_code(source.last_fetch_error) or None,
        "http_status": source.last_fetch_http_status,
        "queued": source.fetch_queued_at is not None,
        "next_at": unix(source.next_fetch_at),
    }


KNOWLEDGE_SOURCE: Resource[KnowledgeSource] = Resource(
    "KnowledgeSource",
    {
        "id": Field({"type": "string", "example": "ks_01j…"}, "pk"),
        "object": Const("knowledge_source"),
        "agent": Field({"type": ["string", "null"], "description": "null: every agent of the project"}, "agent_id"),
        "title": Field({"type": "string"}, "title"),
        "kind": Field({"enum": ["text", "api"]}, "kind"),
        "content": Field(
            {
                "type": "string",
                "description": "text: the Markdown as written; api: the text made from the last good fetch",
            },
            "content",
        ),
        "url": Field({"type": ["string", "null"]}, lambda s: s.url if s.kind == KnowledgeSource.Kind.API else None),
        "response": Field(
            {"oneOf": [KNOWLEDGE_RESPONSE_SCHEMA, {"type": "null"}]},
            lambda s: s.response if s.kind == KnowledgeSource.Kind.API else None,
        ),
        "refresh_minutes": Field(
            {"type": ["integer", "null"], "description": "api: minutes between fetches (at least 15)"},
            "refresh_minutes",
        ),
        "fetch": Field(
            {
                "description": "api: the last fetch (a failed one keeps the passages of the last good one); "
                "null for text sources",
                "oneOf": [
                    {
                        "type": "object",
                        "required": ["status", "at", "error_code", "http_status", "queued", "next_at"],
                        "properties": {
                            "status": {"enum": ["succeeded", "failed", None], "description": "null: not fetched yet"},
                            "at": {"type": ["integer", "null"], "description": "Unix seconds"},
                            "error_code": {"type": ["string", "null"]},
                            "http_status": {"type": ["integer", "null"]},
                            "queued": {"type": "boolean", "description": "a fetch is waiting for a worker"},
                            "next_at": {"type": ["integer", "null"], "description": "the next scheduled fetch"},
                        },
                    },
                    {"type": "null"},
                ],
            },
            _fetch,
        ),
        "passages": Field({"type": "integer", "description": "how many passages it is searched as"}, "passage_count"),
        "searchable": Field({"type": "boolean"}, "searchable"),
        "created_at": Timestamp("created_at"),
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
                "description": "JSON paths under $.config, $.http_tools and $.mcp_tools (tool grants and client tools "
                "are named by their tool: $.config.tools.http[order_status].rules)",
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
