"""The agent editor's form: an agent's draft config as form fields, and a form post back as a config.

Reading a post is parsing only (text to numbers, JSON text to JSON, rows to lists); every rule about what a config
may hold stays with `agents.config_validation.validate_config`, reached through the same `Input` and service as
`PATCH /v1/agents/{id}`. Each field is named by the config path it fills (`$.tools.max_tool_rounds`), so a refusal
lands next to its field (dashboard/problems.py). The tool grants as shown, and as read from the draft, are in
dashboard/editor_grants.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict

from agents.config import APPROVAL_EXPIRES_DEFAULT
from dashboard.editor_grants import (
    BuiltinGrant,
    HttpGrant,
    McpGrant,
    McpServerGrants,
    http_grants,
    mcp_grants,
    starter_text,
)
from dashboard.problems import Problems
from dashboard.tool_form import number_or_text
from llm import providers
from tools.builtins import all_builtins
from tools.models import HttpTool, McpServer

PROVIDERS = (("", "Default (this installation's model)"), *providers.LABELS)
DAYS = (
    ("mon", "Monday"),
    ("tue", "Tuesday"),
    ("wed", "Wednesday"),
    ("thu", "Thursday"),
    ("fri", "Friday"),
    ("sat", "Saturday"),
    ("sun", "Sunday"),
)
EFFECTS = (("read", "read: looks something up"), ("action", "action: changes something"))
MODEL_FIELDS = ("provider", "name", "base_url", "api_key_secret")
DEFAULT_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": False}


def _text(post: Mapping[str, str], key: str) -> str:
    # Browsers send a textarea's line breaks as CRLF; the config keeps what the person typed.
    return str(post.get(key, "")).replace("\r\n", "\n")


def _whole_number(typed: str) -> Any:
    """A whole number (a negative one too, refused by the config's own check with its range); else as typed."""
    number = number_or_text(typed.removeprefix("-"))
    if isinstance(number, int):
        return -number if typed.startswith("-") else number
    return typed


def _approval_entry(approval: str, old_grant: Mapping[str, Any] | None) -> dict[str, str]:
    """`approval` for a grant's config: said when it asks, or when the draft said it before (a grant saved unchanged
    stays as it was)."""
    return {"approval": approval} if approval == "ask" or (old_grant and "approval" in old_grant) else {}


def _approval(post: QueryDict, path: str) -> str:
    return "ask" if post.get(f"{path}.approval") == "ask" else "never"


def _rows(post: QueryDict, *keys: str) -> list[list[str]]:
    """Rows of repeated fields (`key` once per row), as typed."""
    columns = [[value.replace("\r\n", "\n") for value in post.getlist(key)] for key in keys]
    count = max((len(column) for column in columns), default=0)
    return [[column[i] if i < len(column) else "" for column in columns] for i in range(count)]


@dataclass
class ClientTool:
    name: str = ""
    description: str = ""
    parameters: str = ""
    effect: str = "action"
    rules: str = ""


@dataclass
class Interval:
    day: str = "mon"
    open: str = ""
    close: str = ""


@dataclass
class EditorValues:
    """What the editor's fields hold: from the draft, or from a post that was refused (as typed)."""

    name: str
    description: str
    instructions: str
    greeting: str
    model: dict[str, str]
    model_extra: dict[str, Any]  # model settings the form doesn't show (temperature, …), kept as they are
    variables: list[tuple[str, str]]
    tools_enabled: bool
    max_tool_rounds: str
    approval_expires_minutes: str
    allow_anonymous_actions: bool
    builtins: list[BuiltinGrant]
    http: list[HttpGrant]
    mcp: list[McpServerGrants]
    client: list[ClientTool]
    hours_on: bool
    timezone: str
    weekly: list[Interval]
    closed_dates: str
    shown_starters: set[str] = field(default_factory=set)

    @property
    def field_paths(self) -> list[str]:
        """Every config path a field of the form fills: where a refusal can land."""
        paths = [
            "$.name",
            "$.description",
            "$.instructions",
            "$.greeting",
            "$.variables",
            "$.tools.builtin",
            "$.tools.http",
        ]
        paths += [f"$.model.{key}" for key in MODEL_FIELDS]
        paths += ["$.tools.enabled", "$.tools.max_tool_rounds", "$.tools.allow_anonymous_actions"]
        paths += ["$.tools.approval_expires_minutes"]
        paths += [f"{grant.path}.rules" for grant in self.builtins] + [f"{g.path}.enabled" for g in self.builtins]
        paths += [f"{grant.path}.approval" for grant in self.builtins]
        paths += [f"{grant.path}.rules" for grant in self.http]
        paths += ["$.tools.mcp"] + [
            f"{grant.path}{key}" for grant in self.mcp_grants for key in ("", ".rules", ".effect", ".approval")
        ]
        paths += ["$.tools.client"] + [
            f"$.tools.client[{i}].{key}"
            for i in range(len(self.client))
            for key in ("name", "description", "parameters", "effect", "rules")
        ]
        paths += ["$.business_hours.timezone", "$.business_hours.weekly", "$.business_hours.closed_dates"]
        paths += [f"$.business_hours.weekly[{i}]" for i in range(len(self.weekly))]
        return paths

    def translate(self, path: str) -> str:
        """An error's path in this form's terms: relative to the config, grants by tool name."""
        if path.startswith("$.config"):
            path = "$" + path.removeprefix("$.config")
        if path == "$.model":  # "base_url needs api_key_secret"
            return "$.model.api_key_secret"
        if path == "$.business_hours":
            return "$.business_hours.timezone"
        if path.startswith("$.tools.http["):
            index_text, _, rest = path.removeprefix("$.tools.http[").partition("]")
            if index_text.isdigit() and int(index_text) < len(self.granted_order):
                return f"$.tools.http[{self.granted_order[int(index_text)]}]{rest}"
        if path.startswith("$.tools.mcp["):
            index_text, _, rest = path.removeprefix("$.tools.mcp[").partition("]")
            granted = [grant.name for grant in self.mcp_grants if grant.granted]
            if index_text.isdigit() and int(index_text) < len(granted):
                return f"$.tools.mcp[{granted[int(index_text)]}]{rest}"
        return path

    @property
    def granted_order(self) -> list[str]:
        return [grant.name for grant in self.http if grant.used or grant.rules.strip()]

    @property
    def mcp_grants(self) -> list[McpGrant]:
        return [grant for server in self.mcp for grant in server.grants]


def values_from_config(
    *,
    name: str,
    description: str,
    config: Mapping[str, Any],
    tools: Sequence[HttpTool],
    servers: Sequence[McpServer] = (),
) -> EditorValues:
    model = dict(config.get("model") or {})
    tools_config = config.get("tools") or {}
    builtin_config = tools_config.get("builtin") or {}
    hours = config.get("business_hours")
    return EditorValues(
        name=name,
        description=description,
        instructions=str(config.get("instructions", "")),
        greeting=str(config.get("greeting", "")),
        model={key: str(model.get(key, "")) for key in MODEL_FIELDS},
        model_extra={key: value for key, value in model.items() if key not in MODEL_FIELDS},
        variables=list((config.get("variables") or {}).items()),
        tools_enabled=bool(tools_config.get("enabled", True)),
        max_tool_rounds=str(tools_config.get("max_tool_rounds", 3)),
        approval_expires_minutes=str(tools_config.get("approval_expires_minutes", APPROVAL_EXPIRES_DEFAULT)),
        allow_anonymous_actions=bool(tools_config.get("allow_anonymous_actions", False)),
        builtins=[
            BuiltinGrant(
                tool=tool,
                enabled=bool(builtin_config.get(tool.name, {}).get("enabled", tool.default_enabled)),
                rules=str(builtin_config.get(tool.name, {}).get("rules", "")),
                starter_text=starter_text(tool),
                approval=str(builtin_config.get(tool.name, {}).get("approval", "never")),
            )
            for tool in all_builtins()
        ],
        http=http_grants(tools_config, tools),
        mcp=mcp_grants(tools_config, servers),
        client=[
            ClientTool(
                name=str(item.get("name", "")),
                description=str(item.get("description", "")),
                parameters=json.dumps(item.get("parameters", DEFAULT_PARAMETERS), indent=2),
                effect=str(item.get("effect", "action")),
                rules=str(item.get("rules", "")),
            )
            for item in tools_config.get("client", [])
        ],
        hours_on=hours is not None,
        timezone=str((hours or {}).get("timezone", "")),
        weekly=[Interval(str(i["day"]), str(i["open"]), str(i["close"])) for i in (hours or {}).get("weekly", [])],
        closed_dates="\n".join((hours or {}).get("closed_dates", [])),
    )


def _posted_mcp(post: QueryDict, config: Mapping[str, Any], servers: Sequence[McpServer]) -> list[McpServerGrants]:
    """The MCP grants as posted: for each tool shown (every listed tool, and grants of tools no longer listed)."""
    shown = mcp_grants({"mcp": (config.get("tools") or {}).get("mcp", [])}, servers)
    for server in shown:
        for grant in server.grants:
            if not grant.grantable and not grant.used and not grant.rules.strip():
                continue  # shown without fields: nothing to post
            grant.used = post.get(f"{grant.path}.used") == "on"
            grant.effect = _text(post, f"{grant.path}.effect").strip() or "action"
            grant.requires_verified_user = post.get(f"{grant.path}.requires_verified_user") == "on"
            grant.rules = _text(post, f"{grant.path}.rules")
            grant.approval = _approval(post, grant.path)
    return shown


def values_from_post(
    post: QueryDict, *, config: Mapping[str, Any], tools: Sequence[HttpTool], servers: Sequence[McpServer] = ()
) -> EditorValues:
    """The form as posted. `config` is the draft it edits (for what the form doesn't show)."""
    old_model = dict(config.get("model") or {})
    granted = [g for g in (config.get("tools") or {}).get("http", []) if isinstance(g, Mapping)]
    http = [
        HttpGrant(
            name=grant.name,
            description=grant.description,
            effect=grant.effect,
            exists=grant.exists,
            used=post.get(f"{grant.path}.used") == "on",
            rules=_text(post, f"{grant.path}.rules"),
            # Shown for an action only: otherwise (a read, a tool that is gone) the draft's setting stays.
            approval=_approval(post, grant.path) if grant.effect == "action" else grant.approval,
        )
        for grant in http_grants({"http": granted}, tools)
    ]
    return EditorValues(
        name=_text(post, "$.name"),
        description=_text(post, "$.description"),
        instructions=_text(post, "$.instructions"),
        greeting=_text(post, "$.greeting"),
        model={key: _text(post, f"$.model.{key}").strip() for key in MODEL_FIELDS},
        model_extra={key: value for key, value in old_model.items() if key not in MODEL_FIELDS},
        variables=[(n.strip(), v) for n, v in _rows(post, "$.variables.name", "$.variables.value") if n.strip() or v],
        tools_enabled=post.get("$.tools.enabled") == "on",
        max_tool_rounds=_text(post, "$.tools.max_tool_rounds").strip(),
        approval_expires_minutes=_text(post, "$.tools.approval_expires_minutes").strip(),
        allow_anonymous_actions=post.get("$.tools.allow_anonymous_actions") == "on",
        builtins=[
            BuiltinGrant(
                tool=tool,
                enabled=post.get(f"$.tools.builtin.{tool.name}.enabled") == "on",
                rules=_text(post, f"$.tools.builtin.{tool.name}.rules"),
                starter_text=starter_text(tool),
                approval=_approval(post, f"$.tools.builtin.{tool.name}"),
            )
            for tool in all_builtins()
        ],
        http=http,
        mcp=_posted_mcp(post, config, servers),
        client=[
            ClientTool(n.strip(), d, p, e or "action", r)
            for n, d, p, e, r in _rows(
                post,
                "$.tools.client.name",
                "$.tools.client.description",
                "$.tools.client.parameters",
                "$.tools.client.effect",
                "$.tools.client.rules",
            )
            if n.strip() or d.strip() or p.strip() or r.strip()
        ],
        hours_on=post.get("$.business_hours.on") == "on",
        timezone=_text(post, "$.business_hours.timezone").strip(),
        weekly=[
            Interval(d, o.strip(), c.strip())
            for d, o, c in _rows(
                post, "$.business_hours.weekly.day", "$.business_hours.weekly.open", "$.business_hours.weekly.close"
            )
            if o.strip() or c.strip()
        ],
        closed_dates=_text(post, "$.business_hours.closed_dates"),
    )


def config_from_values(values: EditorValues, *, config: Mapping[str, Any]) -> tuple[dict[str, Any], Problems]:
    """The draft config the form asks for, and what could not even be read (JSON that isn't JSON)."""
    problems = Problems()
    out: dict[str, Any] = {"instructions": values.instructions}
    if values.greeting.strip() or "greeting" in config:
        out["greeting"] = values.greeting.strip()
    if values.model["provider"]:
        model: dict[str, Any] = dict(values.model_extra)
        model.update({key: value for key, value in values.model.items() if value})
        out["model"] = model
    variables: dict[str, str] = {}
    for name, value in values.variables:
        if name in variables:
            problems.add("$.variables", f"The variable {name} is named twice.")
        variables[name] = value
    out["variables"] = variables

    rounds = _whole_number(values.max_tool_rounds)
    approval_minutes = _whole_number(values.approval_expires_minutes)
    old_builtins = (config.get("tools") or {}).get("builtin") or {}
    builtin: dict[str, Any] = {}
    for grant in values.builtins:
        asks = grant.approval == "ask"
        if (
            grant.enabled != grant.tool.default_enabled
            or grant.rules.strip()
            or asks
            or grant.tool.name in old_builtins
        ):
            entry: dict[str, Any] = {"enabled": grant.enabled}
            if grant.rules.strip():
                entry["rules"] = grant.rules
            if asks or "approval" in old_builtins.get(grant.tool.name, {}):
                entry["approval"] = grant.approval
            builtin[grant.tool.name] = entry
    client = []
    for index, item in enumerate(values.client):
        tool: dict[str, Any] = {"name": item.name, "description": item.description, "effect": item.effect}
        if item.rules.strip():
            tool["rules"] = item.rules
        if item.parameters.strip():
            try:
                tool["parameters"] = json.loads(item.parameters)
            except json.JSONDecodeError as exc:
                problems.add(
                    f"$.tools.client[{index}].parameters",
                    f"The parameters are not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).",
                )
        client.append(tool)
    old_tools = config.get("tools") or {}
    old_http = {g.get("tool"): g for g in old_tools.get("http", []) if isinstance(g, Mapping)}
    old_mcp = {(g.get("server"), g.get("tool")): g for g in old_tools.get("mcp", []) if isinstance(g, Mapping)}
    tools: dict[str, Any] = {"enabled": values.tools_enabled}
    if rounds != "":
        tools["max_tool_rounds"] = rounds
    if approval_minutes != "" and (
        approval_minutes != APPROVAL_EXPIRES_DEFAULT or "approval_expires_minutes" in old_tools
    ):
        tools["approval_expires_minutes"] = approval_minutes
    tools.update(
        {
            "allow_anonymous_actions": values.allow_anonymous_actions,
            "builtin": builtin,
            "http": [
                {
                    "tool": grant.name,
                    "enabled": grant.used,
                    "rules": grant.rules,
                    **_approval_entry(grant.approval, old_http.get(grant.name)),
                }
                for grant in values.http
                if grant.used or grant.rules.strip() or grant.approval == "ask"
            ],
            "mcp": [
                {
                    "server": grant.server,
                    "tool": grant.tool,
                    "enabled": grant.used,
                    "effect": grant.effect,
                    "requires_verified_user": grant.requires_verified_user,
                    "rules": grant.rules,
                    **_approval_entry(grant.approval, old_mcp.get((grant.server, grant.tool))),
                }
                for grant in values.mcp_grants
                if grant.granted
            ],
            "client": client,
        }
    )
    out["tools"] = tools
    if values.hours_on:
        dates = [line.strip() for line in values.closed_dates.replace(",", "\n").split("\n") if line.strip()]
        out["business_hours"] = {
            "timezone": values.timezone,
            "weekly": [{"day": i.day, "open": i.open, "close": i.close} for i in values.weekly],
            "closed_dates": dates,
        }
    return out, problems


def with_starter_rules(values: EditorValues, name: str) -> EditorValues:
    """`name`'s starter rules added to its grant's rules (those not there yet) and the grant switched on."""
    for grant in values.builtins:
        if grant.tool.name == name:
            missing = [s.rule for s in grant.tool.starter_rules if s.rule not in grant.rules]
            grant.rules = "\n".join(part for part in [grant.rules.rstrip(), *missing] if part)
            grant.enabled = True
            values.shown_starters.add(name)
    return values
