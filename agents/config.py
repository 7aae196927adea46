"""The agent's draft `config`: its JSON Schema (published in the OpenAPI document) and the checks a schema can't
express (name conflicts, time zones, client tool parameter schemas)."""

from __future__ import annotations

import datetime
import zoneinfo
from typing import Any

from django.conf import settings

from kagent.errors import Unprocessable
from kagent.merge_patch import merge_patch
from kagent.validation import make_validator, schema_refusal
from llm import providers
from tools.builtins import BUILTIN_NAMES, Effect
from tools.builtins import get as builtin_get
from tools.schema_bounds import SCHEMA_TOO_COMPLEX, tenant_schema_problem
from tools.validation import MCP_TOOL_SEPARATOR, MODEL_TOOL_NAME_RE, TOOL_NAME_RULES, mcp_tool_name

RULES_MAX = 4000
GREETING_MAX = 500
# SPEC §5 "Approvals": an action's grant may ask a person first; the wait ends after this many minutes (per agent).
APPROVAL: dict[str, Any] = {"enum": ["ask", "never"], "x-message": "approval is ask or never."}
APPROVAL_EXPIRES_DEFAULT = 30
APPROVAL_EXPIRES_MAX = 24 * 60
SECRET_NAME_PATTERN = r"^[A-Z][A-Z0-9_]{0,63}(?!\n)$"
RULES: dict[str, Any] = {
    "type": "string",
    "maxLength": RULES_MAX,
    "x-message": f"Rules are text of at most {RULES_MAX} characters.",
}
ENABLED: dict[str, Any] = {"type": "boolean", "x-message": "enabled is true or false."}
EFFECT: dict[str, Any] = {"enum": ["read", "action"], "x-message": "The effect is read or action."}

AGENT_CONFIG_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "AgentConfig",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "instructions": {
            "type": "string",
            "maxLength": 20000,
            "x-message": "The instructions are text of at most 20,000 characters.",
        },
        # What the chat widget shows a customer who opens it, before anyone writes (issue 31): the business's words,
        # published with the version like the rest of the config; never sent to the model.
        "greeting": {
            "type": "string",
            "maxLength": GREETING_MAX,
            "x-message": f"The greeting is text of at most {GREETING_MAX} characters.",
        },
        "model": {
            "type": "object",
            "additionalProperties": False,
            "required": ["provider"],
            "properties": {
                "provider": {
                    "enum": list(providers.NAMES),
                    "x-message": f"Choose a provider: {', '.join(providers.NAMES[:-1])} or {providers.NAMES[-1]}.",
                },
                "name": {
                    "type": "string",
                    "maxLength": 200,
                    "x-message": "A model name is text of at most 200 characters.",
                },
                "base_url": {
                    "type": "string",
                    # linear: anchored literal
                    "pattern": "^https://",
                    "maxLength": 2048,
                    "x-message": "The base URL is an https:// address of at most 2048 characters.",
                },
                "text_tool_calls": {
                    "type": "boolean",
                    "description": "the model writes its tool calls as text (<tool_call> or <invoke> blocks): "
                    "recover them (default false: a model with a native tool channel never has its text run)",
                    "x-message": "text_tool_calls is true or false.",
                },
                "api_key_secret": {
                    "type": "string",
                    "pattern": SECRET_NAME_PATTERN,
                    "x-message": "The API key secret is the name of one of your secrets, like OPENAI_KEY "
                    "(capital letters, digits and _).",
                },
                "temperature": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 2,
                    "x-message": "The temperature is a number from 0 to 2.",
                },
                "max_output_tokens": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 32000,
                    "x-message": "The longest answer is a whole number of tokens from 1 to 32,000.",
                },
            },
            "dependentRequired": {"base_url": ["api_key_secret"]},
            "x-messages": {
                "required": "Choose a model provider.",
                "dependentRequired": "A model on your own base URL needs the API key secret to call it with.",
                "additionalProperties": "The model settings are provider, name, base_url, api_key_secret, "
                "temperature and max_output_tokens.",
                "type": "The model settings are a JSON object.",
            },
        },
        "variables": {
            "type": "object",
            "maxProperties": 50,
            "propertyNames": {
                # linear: anchored, one class, bounded
                "pattern": r"^[a-z][a-z0-9_]{0,63}(?!\n)$",
                "x-message": "A variable name starts with a lower-case letter and has only lower-case letters, "
                "digits and _ (at most 64), like shop_name.",
            },
            "additionalProperties": {
                "type": "string",
                "maxLength": 1000,
                "x-message": "A variable's value is text of at most 1000 characters.",
            },
            "x-messages": {
                "maxProperties": "An agent has at most 50 variables.",
                "type": "The variables are a JSON object of names and values.",
            },
        },
        "tools": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "enabled": {"type": "boolean", "x-message": "tools.enabled is true or false."},
                "max_tool_rounds": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 5,
                    "x-message": "Max tool rounds is a whole number from 1 to 5.",
                },
                "allow_anonymous_actions": {
                    "type": "boolean",
                    "x-message": "tools.allow_anonymous_actions is true or false.",
                },
                "approval_expires_minutes": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": APPROVAL_EXPIRES_MAX,
                    "x-message": f"The approval wait is a whole number of minutes from 1 to {APPROVAL_EXPIRES_MAX} "
                    "(a day).",
                },
                "builtin": {
                    "type": "object",
                    "propertyNames": {
                        "enum": sorted(BUILTIN_NAMES),
                        "x-message": f"The built-in tools are {', '.join(sorted(BUILTIN_NAMES))}.",
                    },
                    "additionalProperties": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"enabled": ENABLED, "rules": RULES, "approval": APPROVAL},
                        "x-messages": {
                            "additionalProperties": "A built-in tool's grant has enabled, rules and approval.",
                            "type": "A built-in tool's grant is a JSON object.",
                        },
                    },
                    "x-messages": {
                        "type": "tools.builtin is a JSON object of built-in tool names and their grants.",
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
                            "tool": {
                                "type": "string",
                                # linear: anchored, one class, bounded
                                "pattern": r"^[a-z][a-z0-9_]{0,29}(?!\n)$",
                                "x-message": "tool is the name of one of your HTTP tools.",
                            },
                            "enabled": ENABLED,
                            "rules": RULES,
                            "approval": APPROVAL,
                        },
                        "x-messages": {
                            "required": "Each HTTP tool grant names its tool.",
                            "additionalProperties": "An HTTP tool's grant has tool, enabled, rules and approval.",
                            "type": "An HTTP tool's grant is a JSON object.",
                        },
                    },
                    "x-messages": {
                        "maxItems": "An agent can use at most 32 HTTP tools.",
                        "type": "tools.http is a list of grants.",
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
                            "server": {
                                "type": "string",
                                # linear: anchored, one class, bounded
                                "pattern": r"^[a-z][a-z0-9_]{0,19}(?!\n)$",
                                "x-message": "server is the name of one of your MCP servers.",
                            },
                            "tool": {
                                "type": "string",
                                # linear: anchored, one class, bounded (the full name's rules are checked below)
                                "pattern": r"^[a-z0-9_]{1,62}(?!\n)$",
                                "x-message": "tool is the name of a tool your MCP server lists.",
                            },
                            "enabled": ENABLED,
                            "effect": EFFECT,
                            "requires_verified_user": {
                                "type": "boolean",
                                "x-message": "requires_verified_user is true or false.",
                            },
                            "rules": RULES,
                            "approval": APPROVAL,
                        },
                        "x-messages": {
                            "required": "Each MCP tool grant names its server and its tool.",
                            "additionalProperties": "An MCP tool's grant has server, tool, enabled, effect, "
                            "requires_verified_user, rules and approval.",
                            "type": "An MCP tool's grant is a JSON object.",
                        },
                    },
                    "x-messages": {
                        "maxItems": "An agent can use at most 32 tools of MCP servers.",
                        "type": "tools.mcp is a list of grants.",
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
                            "name": {
                                "type": "string",
                                # linear: anchored, one class, bounded
                                "pattern": "^[a-z][a-z0-9_]{0,47}(?!\\n)$",
                                "x-message": "A client tool's name starts with a lower-case letter and has only "
                                "lower-case letters, digits and _ (at most 48), like open_cart.",
                            },
                            "description": {
                                "type": "string",
                                "minLength": 1,
                                "maxLength": 1000,
                                "x-message": "Describe the client tool, in at most 1000 characters: the model "
                                "reads it to know when to use it.",
                            },
                            "parameters": {
                                "type": "object",
                                "x-message": "A client tool's parameters are a JSON Schema object.",
                            },
                            "effect": EFFECT,
                            "rules": RULES,
                        },
                        "x-messages": {
                            "required": "A client tool needs a name and a description.",
                            "additionalProperties": "A client tool has name, description, parameters, effect and "
                            "rules.",
                            "type": "A client tool is a JSON object.",
                        },
                    },
                    "x-messages": {
                        "maxItems": "An agent can have at most 32 client tools.",
                        "type": "tools.client is a list of client tools.",
                    },
                },
            },
            "x-messages": {
                "additionalProperties": "The tool settings are enabled, max_tool_rounds, allow_anonymous_actions, "
                "approval_expires_minutes, builtin, http, mcp and client.",
                "type": "The tool settings are a JSON object.",
            },
        },
        "business_hours": {
            "type": "object",
            "additionalProperties": False,
            "required": ["timezone"],
            "properties": {
                "timezone": {
                    "type": "string",
                    "maxLength": 64,
                    "x-message": "The time zone is a name like Asia/Riyadh or Europe/Paris.",
                },
                "weekly": {
                    "type": "array",
                    "maxItems": 50,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["day", "open", "close"],
                        "properties": {
                            "day": {
                                "enum": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
                                "x-message": "The day is one of mon, tue, wed, thu, fri, sat, sun.",
                            },
                            "open": {
                                "type": "string",
                                # linear: anchored, fixed length
                                "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9](?!\\n)$",
                                "x-message": "Write the opening time as HH:MM, from 00:00 to 23:59.",
                            },
                            "close": {
                                "type": "string",
                                # linear: anchored, fixed length
                                "pattern": "^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)(?!\\n)$",
                                "x-message": "Write the closing time as HH:MM, from 00:01 to 24:00.",
                            },
                        },
                        "x-messages": {
                            "required": "Each opening period has a day, an opening and a closing time.",
                            "additionalProperties": "An opening period has day, open and close.",
                            "type": "An opening period is a JSON object.",
                        },
                    },
                    "x-messages": {
                        "maxItems": "At most 50 opening periods a week.",
                        "type": "The weekly hours are a list of opening periods.",
                    },
                },
                "closed_dates": {
                    "type": "array",
                    "maxItems": 366,
                    "items": {
                        "type": "string",
                        # linear: anchored, fixed length
                        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}(?!\\n)$",
                        "x-message": "Write each closed date as YYYY-MM-DD, like 2027-01-01.",
                    },
                    "x-messages": {
                        "maxItems": "At most 366 closed dates.",
                        "type": "The closed dates are a list of dates.",
                    },
                },
            },
            "x-messages": {
                "required": "Business hours need a time zone.",
                "additionalProperties": "Business hours have timezone, weekly and closed_dates.",
                "type": "Business hours are a JSON object.",
            },
        },
    },
    "x-messages": {
        "additionalProperties": "The agent's settings are instructions, greeting, model, variables, tools and "
        "business_hours.",
        "type": "The agent's settings (config) must be a JSON object.",
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
