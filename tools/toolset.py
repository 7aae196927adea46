"""A run's tool set: which tools the model is offered, decided when a segment starts, sorted by name.

Seed, "Effects and when tools are available": action tools are removed for one-shot calls without
`allow_actions: true`, for unverified end users while `tools.allow_anonymous_actions` is off, and while the agent's
`actions_paused` is on; escalation tools never. Client tools are not offered on `store: false`.

A tool set travels as `ToolSpec`s (the policy check, the executors, the engine); it is stored as JSON in
`Segment.tool_set` and `Run.tool_set` (and compared there: a sandbox segment ends when the draft's tool set changes),
so `ToolSpec.to_dict`/`from_dict` at that boundary keep the stored shape exactly as it always was.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tools import builtins
from tools.builtin_tool import BuiltinTool, Effect
from tools.mcp_validation import closed_schema, mcp_tool_name
from tools.shaping import clean_text

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


class ToolKind(StrEnum):
    BUILTIN = "builtin"  # runs inside K-Agent (its executor: tools/builtins.py `executor`)
    HTTP = "http"  # K-Agent calls the business's endpoint (tools/http_call.py)
    CLIENT = "client"  # the business's app runs it; the run pauses for its output
    MCP = "mcp"  # K-Agent calls a tool of the business's MCP server (tools/mcp_call.py)


@dataclass(frozen=True)
class ToolSpec:
    """One offered tool, as the model is shown it and as the policy check and the executors need it."""

    name: str
    kind: ToolKind
    effect: Effect
    description: str  # with the grant's rules under "This company's rules for this action"
    parameters: dict[str, Any]  # the JSON Schema of the arguments
    requires_verified_user: bool = False
    version: str | None = None  # built-ins: the version of their model-facing text
    definition: dict[str, Any] | None = None  # HTTP and MCP tools: the definition to call (as published)
    approval: bool = False  # an action whose grant says `approval: ask`: a person decides before it runs

    @property
    def builtin(self) -> BuiltinTool | None:
        """The built-in this spec offers (its own declarations: sessions only, business hours, limits…)."""
        return builtins.get(self.name) if self.kind == ToolKind.BUILTIN else None

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON, key for key as the tool set has always been stored."""
        data: dict[str, Any] = {"name": self.name, "kind": str(self.kind), "effect": str(self.effect)}
        if self.version is not None:
            data["version"] = self.version
        data.update(
            description=self.description,
            parameters=self.parameters,
            requires_verified_user=self.requires_verified_user,
        )
        if self.definition is not None:
            data["definition"] = self.definition
        if self.approval:
            data["approval"] = "ask"
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolSpec:
        return cls(
            name=data["name"],
            kind=ToolKind(data["kind"]),
            effect=Effect(data["effect"]),
            description=data["description"],
            parameters=data["parameters"],
            requires_verified_user=bool(data.get("requires_verified_user")),
            version=data.get("version"),
            definition=data.get("definition"),
            approval=data.get("approval") == "ask",
        )


def tool_set_json(tool_set: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """A tool set as stored in `Segment.tool_set` and `Run.tool_set`."""
    return [spec.to_dict() for spec in tool_set]


def tool_set_from_json(stored: Iterable[Mapping[str, Any]]) -> tuple[ToolSpec, ...]:
    """A stored tool set, typed again."""
    return tuple(ToolSpec.from_dict(item) for item in stored)


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


def _asks(grant: Mapping[str, Any], effect: Effect) -> bool:
    """Whether a call of this grant waits for a person's approval: an action whose grant says so."""
    return effect == Effect.ACTION and grant.get("approval") == "ask"


def _builtin_specs(tools_config: dict[str, Any], facts: ToolSetFacts, gated: str | None) -> list[ToolSpec]:
    specs = []
    for tool in builtins.all_builtins():
        grant = tools_config.get("builtin", {}).get(tool.name, {})
        if not grant.get("enabled", tool.default_enabled):
            continue
        if tool.sessions_only and facts.one_shot:
            continue
        if tool.requires_searchable_knowledge and not facts.has_searchable_knowledge:
            continue
        if tool.effect == Effect.ACTION and gated:
            continue
        specs.append(
            ToolSpec(
                name=tool.name,
                kind=ToolKind.BUILTIN,
                effect=tool.effect,
                version=tool.version,
                description=builtins.model_description(tool, grant.get("rules")),
                parameters=tool.parameters,
                approval=_asks(grant, tool.effect),
            )
        )
    return specs


def _http_specs(
    tools_config: dict[str, Any], http_tools: dict[str, dict[str, Any]], gated: str | None
) -> list[ToolSpec]:
    specs = []
    for grant in tools_config.get("http", []):
        if not grant.get("enabled", True):
            continue
        definition = http_tools.get(grant["tool"])
        if definition is None:
            continue  # a draft may grant a tool that doesn't exist yet; publishing refuses that
        if definition["effect"] == Effect.ACTION and gated:
            continue
        specs.append(
            ToolSpec(
                name=definition["name"],
                kind=ToolKind.HTTP,
                effect=Effect(definition["effect"]),
                description=builtins.with_rules(definition["description"], grant.get("rules")),
                parameters=definition["config"].get("parameters") or dict(EMPTY_PARAMETERS),
                requires_verified_user=bool(definition.get("requires_verified_user")),
                definition=definition,
                approval=_asks(grant, Effect(definition["effect"])),
            )
        )
    return specs


def _mcp_specs(tools_config: dict[str, Any], mcp_tools: dict[str, dict[str, Any]], gated: str | None) -> list[ToolSpec]:
    """Granted MCP tools. The effect and `requires_verified_user` are the grant's (the business's declaration: an
    MCP server's annotations are its own hints, not trusted); the description and input schema are the listing's."""
    specs = []
    for grant in tools_config.get("mcp", []):
        if not grant.get("enabled", True):
            continue
        definition = mcp_tools.get(mcp_tool_name(grant["server"], grant["tool"]))
        if definition is None:
            continue  # not listed (or not grantable) now: the draft offers it once it is; publishing refuses that
        effect = Effect(grant.get("effect", "action"))
        if effect == Effect.ACTION and gated:
            continue
        description = clean_text(definition["description"], keep_joiners=True).strip()
        specs.append(
            ToolSpec(
                name=definition["name"],
                kind=ToolKind.MCP,
                effect=effect,
                description=builtins.with_rules(
                    description or f"{definition['tool']} (a tool of the {definition['server']} system)",
                    grant.get("rules"),
                ),
                # Every object closed: the model can't add an argument the schema doesn't name (an `admin`, a
                # `customer_id`), and the policy checks the arguments against this schema.
                parameters=closed_schema(definition["input_schema"]),
                requires_verified_user=bool(grant.get("requires_verified_user")),
                definition=definition,
                approval=_asks(grant, effect),
            )
        )
    return specs


def _client_specs(tools_config: dict[str, Any], gated: str | None) -> list[ToolSpec]:
    specs = []
    for client in tools_config.get("client", []):
        effect = Effect(client.get("effect", "action"))
        if effect == Effect.ACTION and gated:
            continue
        specs.append(
            ToolSpec(
                name=client["name"],
                kind=ToolKind.CLIENT,
                effect=effect,
                description=builtins.with_rules(client["description"], client.get("rules")),
                parameters=client.get("parameters") or dict(EMPTY_PARAMETERS),
            )
        )
    return specs


def tool_set_build(
    *,
    config: dict[str, Any],
    http_tools: dict[str, dict[str, Any]],
    mcp_tools: dict[str, dict[str, Any]] | None = None,
    facts: ToolSetFacts,
) -> tuple[ToolSpec, ...]:
    """The offered tools, sorted by name. Store them with `tool_set_json`."""
    tools_config = config["tools"]
    if not tools_config.get("enabled", True):
        return ()
    gated = actions_gated(config, facts)
    specs = (
        _builtin_specs(tools_config, facts, gated)
        + _http_specs(tools_config, http_tools, gated)
        + _mcp_specs(tools_config, mcp_tools or {}, gated)
    )
    if facts.store:
        specs += _client_specs(tools_config, gated)
    return tuple(sorted(specs, key=lambda spec: spec.name))


def without_client_tools(tool_set: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A segment's stored tool set for a `store: false` run: client tools are not offered there."""
    return [spec for spec in tool_set if spec["kind"] != ToolKind.CLIENT]
