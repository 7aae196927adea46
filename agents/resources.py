"""How agents, their versions and knowledge sources look in the API (rendered and in the OpenAPI document)."""

from __future__ import annotations

from agents.config import AGENT_CONFIG_SCHEMA
from agents.models import Agent, AgentVersion, KnowledgeSource
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
