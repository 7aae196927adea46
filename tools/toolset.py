"""A run's tool set: which tools the model is offered, decided when a segment starts, sorted by name.

Seed, "Effects and when tools are available": action tools are removed for one-shot calls without
`allow_actions: true`, for unverified end users while `tools.allow_anonymous_actions` is off, and while the agent's
`actions_paused` is on; escalation tools never. Client tools are not offered on `store: false`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tools import builtins


@dataclass(frozen=True)
class ToolSetFacts:
    one_shot: bool
    allow_actions: bool
    verified: bool
    actions_paused: bool
    store: bool
    has_searchable_knowledge: bool


def actions_gated(config: dict[str, Any], facts: ToolSetFacts) -> str | None:
    """Why action tools are removed for these facts, or None when they are offered."""
    if facts.actions_paused:
        return "actions_paused"
    if facts.one_shot and not facts.allow_actions:
        return "one_shot_without_allow_actions"
    if not facts.verified and not config["tools"].get("allow_anonymous_actions", False):
        return "unverified_end_user"
    return None


def tool_set_build(
    *, config: dict[str, Any], http_tools: dict[str, dict[str, Any]], facts: ToolSetFacts
) -> list[dict[str, Any]]:
    """The offered tools as JSON-ready specs: name, kind, effect, description (with the grant's rules),
    parameters, requires_verified_user, and for HTTP tools the definition to call."""
    tools_config = config["tools"]
    if not tools_config.get("enabled", True):
        return []
    gated = actions_gated(config, facts)
    specs: list[dict[str, Any]] = []

    for tool in builtins.all_builtins():
        grant = tools_config.get("builtin", {}).get(tool.name, {})
        if not grant.get("enabled", tool.default_enabled):
            continue
        if tool.sessions_only and facts.one_shot:
            continue
        if tool.requires_searchable_knowledge and not facts.has_searchable_knowledge:
            continue
        if tool.effect == builtins.Effect.ACTION and gated:
            continue
        specs.append(
            {
                "name": tool.name,
                "kind": "builtin",
                "effect": str(tool.effect),
                "version": tool.version,
                "description": builtins.model_description(tool, grant.get("rules")),
                "parameters": tool.parameters,
                "requires_verified_user": False,
            }
        )

    for grant in tools_config.get("http", []):
        if not grant.get("enabled", True):
            continue
        definition = http_tools.get(grant["tool"])
        if definition is None:
            continue  # a draft may grant a tool that doesn't exist yet; publishing refuses that
        if definition["effect"] == "action" and gated:
            continue
        specs.append(
            {
                "name": definition["name"],
                "kind": "http",
                "effect": definition["effect"],
                "description": builtins.with_rules(definition["description"], grant.get("rules")),
                "parameters": definition["config"].get("parameters")
                or {"type": "object", "properties": {}, "additionalProperties": False},
                "requires_verified_user": bool(definition.get("requires_verified_user")),
                "definition": definition,
            }
        )

    if facts.store:
        for client in tools_config.get("client", []):
            effect = client.get("effect", "action")
            if effect == "action" and gated:
                continue
            specs.append(
                {
                    "name": client["name"],
                    "kind": "client",
                    "effect": effect,
                    "description": builtins.with_rules(client["description"], client.get("rules")),
                    "parameters": client.get("parameters")
                    or {"type": "object", "properties": {}, "additionalProperties": False},
                    "requires_verified_user": False,
                }
            )
    return sorted(specs, key=lambda spec: spec["name"])


def without_client_tools(tool_set: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A segment's tool set for a `store: false` run: client tools are not offered there."""
    return [spec for spec in tool_set if spec["kind"] != "client"]
