"""The checks of an agent's draft `config`: its JSON Schema first (agents/config.py), defaults filled in, then what
a schema can't express (the operator's models, approvals only on actions, name conflicts, MCP tool names, time
zones and dates, client tool parameter schemas)."""

from __future__ import annotations

import datetime
import zoneinfo
from typing import Any

from django.conf import settings

from agents.config import CONFIG_VALIDATOR, DEFAULT_CONFIG
from kagent.errors import Unprocessable
from kagent.merge_patch import merge_patch
from kagent.validation import schema_refusal
from tools.builtin_tool import Effect
from tools.builtins import BUILTIN_NAMES
from tools.builtins import get as builtin_get
from tools.mcp_validation import MCP_TOOL_SEPARATOR, MODEL_TOOL_NAME_RE, TOOL_NAME_RULES, mcp_tool_name
from tools.schema_bounds import SCHEMA_TOO_COMPLEX, tenant_schema_problem


def _invalid(path: str, message: str) -> Unprocessable:
    return Unprocessable("invalid_config", message, details=[{"path": path, "message": message}])


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
        f"{name[:200]!r} is not a model this service offers (offered: {listed}). To use another, give the agent "
        "your own base URL and API key secret."
    )


def _check_approvals(tools: dict[str, Any]) -> None:
    """`approval: ask` is for actions: a read or an escalation never waits for a person. (An HTTP tool's effect is
    its definition's: on a read tool the setting has no effect.)"""
    for name, grant in tools["builtin"].items():
        tool = builtin_get(name)
        if grant.get("approval") == "ask" and tool is not None and tool.effect != Effect.ACTION:
            raise _invalid(
                f"$.tools.builtin.{name}.approval", f"{name} is not an action, so it never waits for approval."
            )
    for index, grant in enumerate(tools["mcp"]):
        if grant.get("approval") == "ask" and grant["effect"] != Effect.ACTION:
            raise _invalid(f"$.tools.mcp[{index}].approval", "Only an action (effect: action) can wait for approval.")


def validate_config(config: Any) -> dict[str, Any]:
    """Validates a whole draft config and returns it with defaults filled in. Raises Unprocessable."""
    if not isinstance(config, dict):
        raise _invalid("$", "The agent's settings (config) must be a JSON object.")
    refused = schema_refusal(CONFIG_VALIDATOR, config)
    if refused is not None:
        raise Unprocessable("invalid_config", refused[0], details=refused[1])

    out: dict[str, Any] = merge_patch(DEFAULT_CONFIG, config)
    refusal = operator_model_refusal(out.get("model") or {})
    if refusal:
        raise Unprocessable("model_not_allowed", refusal, details=[{"path": "$.model.name", "message": refusal}])
    tools = out["tools"]
    for index, client in enumerate(tools["client"]):
        client.setdefault("effect", "action")  # seed: a client tool's effect defaults to action
        client.setdefault("rules", "")
        params = client.setdefault("parameters", {"type": "object", "properties": {}, "additionalProperties": False})
        path = f"$.tools.client[{index}].parameters"
        if params.get("type") != "object":
            raise _invalid(path, "A client tool's parameters are a JSON Schema of type object.")
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
            raise _invalid(
                "$.business_hours.timezone", "That is not a time zone we know: write one like Asia/Riyadh."
            ) from None
        for index, interval in enumerate(hours.get("weekly", [])):
            if interval["close"] <= interval["open"]:
                raise _invalid(f"$.business_hours.weekly[{index}]", "Each opening period closes after it opens.")
        for index, day in enumerate(hours.get("closed_dates", [])):
            try:
                datetime.date.fromisoformat(day)
            except ValueError:
                raise _invalid(
                    f"$.business_hours.closed_dates[{index}]", f"{day} is not a date on the calendar."
                ) from None
    return out
