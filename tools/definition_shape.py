"""The JSON shape of an HTTP tool definition: `TOOL_DEFINITION_SCHEMA` (what a write is checked against first, and
what the API's schema shows of a tool's config) and `RESPONSE_FIELD_SCHEMA` (one entry of `response.fields`, shared
with API knowledge sources). The rules past the shape are tools/validation.py's.
"""

from __future__ import annotations

from typing import Any

from kagent.validation import make_validator

MAX_ITEMS = 20
MAX_TIMEOUT_MS = 15_000

# One entry of `response.fields` (HTTP tools and API knowledge sources): which value of a row, under which label.
RESPONSE_FIELD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["path", "label"],
    "additionalProperties": False,
    "properties": {
        "path": {
            "type": "string",
            "minLength": 1,
            "maxLength": 200,
            "x-message": "A response field's path names a value of the row, like status or order.total (at most 200 "
            "characters).",
        },
        "label": {
            "type": "string",
            "minLength": 1,
            "maxLength": 60,
            "x-message": "A response field's label is the name the model reads, at most 60 characters.",
        },
    },
    "x-messages": {
        "required": "Each response field has a path and a label.",
        "additionalProperties": "A response field has path and label.",
        "type": "A response field is a JSON object: {path, label}.",
    },
}

TOOL_DEFINITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "description", "effect", "config"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "x-message": "Give the tool a name."},
        "description": {
            "type": "string",
            "minLength": 1,
            "maxLength": 1000,
            "x-message": "Describe what the tool does, in at most 1000 characters: the model reads it to know when "
            "to call it.",
        },
        "effect": {"enum": ["read", "action"], "x-message": "The effect is read or action."},
        "requires_verified_user": {"type": "boolean", "x-message": "requires_verified_user is true or false."},
        "config": {
            "type": "object",
            "required": ["method", "url"],
            "additionalProperties": False,
            "properties": {
                "method": {
                    "enum": ["GET", "POST", "PUT", "PATCH", "DELETE"],
                    "x-message": "The method is GET, POST, PUT, PATCH or DELETE.",
                },
                "url": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 2048,
                    "x-message": "Give the URL to call: https://, at most 2048 characters.",
                },
                "headers": {
                    "type": "object",
                    "maxProperties": 20,
                    "additionalProperties": {
                        "type": "string",
                        "maxLength": 2048,
                        "x-message": "A header's value is text of at most 2048 characters.",
                    },
                    "x-messages": {
                        "maxProperties": "A tool sends at most 20 headers.",
                        "type": "The headers are a JSON object of names and values.",
                    },
                },
                "body": {"type": "object", "x-message": "The body is a JSON object (a template of the request)."},
                "parameters": {"type": "object", "x-message": "The parameters are a JSON Schema object."},
                "response": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "items_path": {
                            "type": "string",
                            "maxLength": 200,
                            "x-message": "The items path is text of at most 200 characters.",
                        },
                        "fields": {
                            "type": "array",
                            "items": RESPONSE_FIELD_SCHEMA,
                            "x-message": "The response fields are a list of {path, label}.",
                        },
                        "max_items": {
                            "type": "integer",
                            "minimum": 1,
                            "x-message": f"Max items is a whole number from 1 to {MAX_ITEMS}.",
                        },
                        "empty_message": {
                            "type": "string",
                            "maxLength": 500,
                            "x-message": "The message for no results is text of at most 500 characters.",
                        },
                    },
                    "x-messages": {
                        "additionalProperties": "The response settings are items_path, fields, max_items and "
                        "empty_message.",
                        "type": "The response settings are a JSON object.",
                    },
                },
                "timeout_ms": {
                    "type": "integer",
                    "minimum": 100,
                    "x-message": f"The timeout is a whole number of milliseconds from 100 to {MAX_TIMEOUT_MS}.",
                },
            },
            "x-messages": {
                "required": "The call needs a method and a URL.",
                "additionalProperties": "The call's settings are method, url, headers, body, parameters, response and "
                "timeout_ms.",
                "type": "The call's settings (config) are a JSON object.",
            },
        },
    },
    "x-messages": {
        "required": "A tool needs a name, a description, an effect and its call's settings (config).",
        "additionalProperties": "A tool has name, description, effect, requires_verified_user and config.",
        "type": "A tool is a JSON object.",
    },
}
TOOL_SHAPE = make_validator(TOOL_DEFINITION_SCHEMA)
