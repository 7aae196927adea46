"""The agent's draft `config`: its JSON Schema (published in the OpenAPI document), its validator and its defaults.
The checks a schema can't express (name conflicts, time zones, client tool parameter schemas) are in
agents/config_validation.py."""

from __future__ import annotations

from typing import Any

from kagent.validation import make_validator
from llm import providers
from tools.builtins import BUILTIN_NAMES

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
