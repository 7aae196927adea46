"""The agent's draft `config`: its JSON Schema (published in the OpenAPI document) and the checks a schema can't
express (name conflicts, time zones, client tool parameter schemas)."""

from __future__ import annotations

import datetime
import zoneinfo
from typing import Any

from django.conf import settings

from kagent.errors import Unprocessable
from kagent.merge_patch import merge_patch
from kagent.validation import make_validator, schema_errors
from tools.builtins import BUILTIN_NAMES, Effect
from tools.builtins import get as builtin_get
from tools.schema_bounds import SCHEMA_TOO_COMPLEX, tenant_schema_problem
from tools.validation import MCP_TOOL_SEPARATOR, MODEL_TOOL_NAME_RE, TOOL_NAME_RULES, mcp_tool_name

RULES_MAX = 4000
# SPEC §5 "Approvals": an action's grant may ask a person first; the wait ends after this many minutes (per agent).
APPROVAL: dict[str, Any] = {"enum": ["ask", "never"]}
APPROVAL_EXPIRES_DEFAULT = 30
APPROVAL_EXPIRES_MAX = 24 * 60
SECRET_NAME_PATTERN = r"^[A-Z][A-Z0-9_]{0,63}(?!\n)$"

AGENT_CONFIG_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "AgentConfig",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "instructions": {"type": "string", "maxLength": 20000},
        "model": {
            "type": "object",
            "additionalProperties": False,
            "required": ["provider"],
            "properties": {
                "provider": {"enum": ["openai_compatible", "anthropic", "demo"]},
                "name": {"type": "string", "maxLength": 200},
                # linear: anchored literal
                "base_url": {"type": "string", "pattern": "^https://", "maxLength": 2048},
                "api_key_secret": {"type": "string", "pattern": SECRET_NAME_PATTERN},
                "temperature": {"type": "number", "minimum": 0, "maximum": 2},
                "max_output_tokens": {"type": "integer", "minimum": 1, "maximum": 32000},
            },
            "dependentRequired": {"base_url": ["api_key_secret"]},
        },
        "variables": {
            "type": "object",
            "maxProperties": 50,
            # linear: anchored, one class, bounded
            "propertyNames": {"pattern": r"^[a-z][a-z0-9_]{0,63}(?!\n)$"},
            "additionalProperties": {"type": "string", "maxLength": 1000},
        },
        "tools": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "enabled": {"type": "boolean"},
                "max_tool_rounds": {"type": "integer", "minimum": 1, "maximum": 5},
                "allow_anonymous_actions": {"type": "boolean"},
                "approval_expires_minutes": {"type": "integer", "minimum": 1, "maximum": APPROVAL_EXPIRES_MAX},
                "builtin": {
                    "type": "object",
                    "propertyNames": {"enum": sorted(BUILTIN_NAMES)},
                    "additionalProperties": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "enabled": {"type": "boolean"},
                            "rules": {"type": "string", "maxLength": RULES_MAX},
                            "approval": APPROVAL,
                        },
                    },
                },
                "http": {
                    "type": "array",
                    "maxItems": 32,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["tool"],
                        "properties": {
                            # linear: anchored, one class, bounded
                            "tool": {"type": "string", "pattern": r"^[a-z][a-z0-9_]{0,29}(?!\n)$"},
                            "enabled": {"type": "boolean"},
                            "rules": {"type": "string", "maxLength": RULES_MAX},
                            "approval": APPROVAL,
                        },
                    },
                },
                "mcp": {
                    "type": "array",
                    "maxItems": 32,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["server", "tool"],
                        "properties": {
                            # linear: anchored, one class, bounded
                            "server": {"type": "string", "pattern": r"^[a-z][a-z0-9_]{0,19}(?!\n)$"},
                            # linear: anchored, one class, bounded (the full name's rules are checked below)
                            "tool": {"type": "string", "pattern": r"^[a-z0-9_]{1,62}(?!\n)$"},
                            "enabled": {"type": "boolean"},
                            "effect": {"enum": ["read", "action"]},
                            "requires_verified_user": {"type": "boolean"},
                            "rules": {"type": "string", "maxLength": RULES_MAX},
                            "approval": APPROVAL,
                        },
                    },
                },
                "client": {
                    "type": "array",
                    "maxItems": 32,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "description"],
                        "properties": {
                            # linear: anchored, one class, bounded
                            "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,47}(?!\\n)$"},
                            "description": {"type": "string", "minLength": 1, "maxLength": 1000},
                            "parameters": {"type": "object"},
                            "effect": {"enum": ["read", "action"]},
                            "rules": {"type": "string", "maxLength": RULES_MAX},
                        },
                    },
                },
            },
        },
        "business_hours": {
            "type": "object",
            "additionalProperties": False,
            "required": ["timezone"],
            "properties": {
                "timezone": {"type": "string", "maxLength": 64},
                "weekly": {
                    "type": "array",
                    "maxItems": 50,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["day", "open", "close"],
                        "properties": {
                            "day": {"enum": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]},
                            # linear: anchored, fixed length
                            "open": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9](?!\\n)$"},
                            # linear: anchored, fixed length
                            "close": {"type": "string", "pattern": "^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)(?!\\n)$"},
                        },
                    },
                },
                "closed_dates": {
                    "type": "array",
                    "maxItems": 366,
                    # linear: anchored, fixed length
                    "items": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}(?!\\n)$"},
                },
            },
        },
    },
}

CONFIG_VALIDATOR = make_validator(AGENT_CONFIG_SCHEMA)

DEFAULT_CONFIG: dict[str, Any] = {
    "instructions": "",
    "variables": {},
    "tools": {
        "enabled": True,
        "max_tool_rounds": 3,
        "allow_anonymous_actions": False,
        "approval_expires_minutes": APPROVAL_EXPIRES_DEFAULT,
        "builtin": {},
        "http": [],
        "mcp": [],
        "client": [],
    },
}


def _invalid(path: str, message: str) -> Unprocessable:
    return Unprocessable("invalid_config", f"{path}: {message}", details=[{"path": path, "message": message}])


def _conflict(path: str, message: str) -> Unprocessable:
    return Unprocessable("tool_name_conflict", message, details=[{"path": path, "message": message}])


def operator_models() -> list[str]:
    """The model names offered on the operator's endpoint (KAGENT_OPERATOR_MODELS; else its KAGENT_LLM_MODEL)."""
    configured = list(getattr(settings, "KAGENT_OPERATOR_MODELS", []) or [])
    default = str(getattr(settings, "KAGENT_LLM_MODEL", "") or "")
    return configured or ([default] if default else [])


def operator_model_refusal(model: dict[str, Any]) -> str | None:
    """Why an agent may not name this model, or None. On the operator's endpoint (no `base_url` of the tenant's own)
    the operator pays for every call: only the names it offers (second security review, item 8). No name: the
    operator's own default."""
    name = str(model.get("name") or "")
    if model.get("provider") != "openai_compatible" or model.get("base_url") or not name:
        return None
    offered = operator_models()
    if any(name == allowed or (allowed.endswith("*") and name.startswith(allowed[:-1])) for allowed in offered):
        return None
    listed = ", ".join(offered) if offered else "none (leave the name out for the default)"
    return (
        f"{name!r} is not a model this service offers on its own endpoint (offered: {listed}); "
        "to use another, give the agent its own model.base_url and model.api_key_secret"
    )


def _check_approvals(tools: dict[str, Any]) -> None:
    """`approval: ask` is for actions: a read or an escalation never waits for a person. (An HTTP tool's effect is
    its definition's: on a read tool the setting has no effect.)"""
    for name, grant in tools["builtin"].items():
        tool = builtin_get(name)
        if grant.get("approval") == "ask" and tool is not None and tool.effect != Effect.ACTION:
            raise _invalid(f"$.tools.builtin.{name}.approval", f"{name} is not an action: it never waits for approval")
    for index, grant in enumerate(tools["mcp"]):
        if grant.get("approval") == "ask" and grant["effect"] != Effect.ACTION:
            raise _invalid(f"$.tools.mcp[{index}].approval", "only an action (effect: action) can wait for approval")


def validate_config(config: Any) -> dict[str, Any]:
    """Validates a whole draft config and returns it with defaults filled in. Raises Unprocessable."""
    if not isinstance(config, dict):
        raise _invalid("$", "config must be a JSON object")
    errors = schema_errors(CONFIG_VALIDATOR, config)
    if errors:
        raise Unprocessable("invalid_config", f"{errors[0]['path']}: {errors[0]['message']}", details=errors)

    out: dict[str, Any] = merge_patch(DEFAULT_CONFIG, config)
    refusal = operator_model_refusal(out.get("model") or {})
    if refusal:
        raise Unprocessable(
            "model_not_allowed", f"$.model.name: {refusal}", details=[{"path": "$.model.name", "message": refusal}]
        )
    tools = out["tools"]
    for index, client in enumerate(tools["client"]):
        client.setdefault("effect", "action")  # seed: a client tool's effect defaults to action
        client.setdefault("rules", "")
        params = client.setdefault("parameters", {"type": "object", "properties": {}, "additionalProperties": False})
        path = f"$.tools.client[{index}].parameters"
        if params.get("type") != "object":
            raise _invalid(path, "parameters is a JSON Schema of type object")
        problem = tenant_schema_problem(params, at=path)
        if problem is not None:
            code = SCHEMA_TOO_COMPLEX if problem.too_complex else "invalid_config"
            raise Unprocessable(code, problem.text, details=[{"path": problem.path, "message": problem.message}])
    for grant in tools["http"]:
        grant.setdefault("enabled", True)
        grant.setdefault("rules", "")
    for grant in tools["mcp"]:
        grant.setdefault("enabled", True)
        grant.setdefault("effect", "action")  # the business's declaration; MCP annotations are not trusted
        grant.setdefault("requires_verified_user", False)
        grant.setdefault("rules", "")
    _check_approvals(tools)

    seen: dict[str, str] = {}
    for index, grant in enumerate(tools["http"]):
        name, path = grant["tool"], f"$.tools.http[{index}].tool"
        if name in BUILTIN_NAMES:
            raise _conflict(path, f"{name} is the name of a built-in tool.")
        if name in seen:
            raise _conflict(path, f"{name} is granted twice.")
        seen[name] = path
    for index, grant in enumerate(tools["mcp"]):
        name, path = mcp_tool_name(grant["server"], grant["tool"]), f"$.tools.mcp[{index}]"
        server = grant["server"]
        if MCP_TOOL_SEPARATOR in server or server.endswith("_"):
            raise _invalid(f"{path}.server", "MCP server names have no '__' and don't end in '_'.")
        if not MODEL_TOOL_NAME_RE.match(name):
            raise _invalid(path, f"{name} doesn't fit the tool-name rules: {TOOL_NAME_RULES}.")
        if name in BUILTIN_NAMES or grant["tool"] in BUILTIN_NAMES:
            raise _conflict(path, f"{grant['tool']} is named like a built-in tool.")
        if name in seen:
            raise _conflict(path, f"{name} is already the name of another tool of this agent.")
        seen[name] = path
    for index, client in enumerate(tools["client"]):
        name, path = client["name"], f"$.tools.client[{index}].name"
        if name in BUILTIN_NAMES:
            raise _conflict(path, f"{name} is the name of a built-in tool.")
        if name in seen:
            raise _conflict(path, f"{name} is already the name of another tool of this agent.")
        seen[name] = path

    hours = out.get("business_hours")
    if hours is not None:
        try:
            zoneinfo.ZoneInfo(hours["timezone"])
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise _invalid("$.business_hours.timezone", "not a known IANA time zone, like Asia/Riyadh") from None
        for index, interval in enumerate(hours.get("weekly", [])):
            if interval["close"] <= interval["open"]:
                raise _invalid(f"$.business_hours.weekly[{index}]", "close must be after open")
        for index, day in enumerate(hours.get("closed_dates", [])):
            try:
                datetime.date.fromisoformat(day)
            except ValueError:
                raise _invalid(f"$.business_hours.closed_dates[{index}]", "not a calendar date") from None
    return out
