"""Every field that can be refused is refused in plain words (issue 31): a business owner reads these messages next
to the dashboard's fields, so they never quote a pattern, a JSON type name or a JSON path. The codes and the
`details[].path` stay for programs."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.config import AGENT_CONFIG_SCHEMA
from agents.config_validation import validate_config
from kagent.errors import ApiError
from kagent.inputs import Input
from tools.definition_shape import TOOL_DEFINITION_SCHEMA
from tools.validation import validate_http_tool

ROOT = Path(__file__).resolve().parents[2]
# Every API module of every app (an `apis.py`, or the modules of an `apis/` package), found, not listed: a body
# moved to another app's API is swept there too.
API_MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for app in ("kagent", "agents", "tools", "hooks", "conversations", "runs", "desk", "checks")
    for path in [*(ROOT / app).glob("apis.py"), *(ROOT / app).glob("apis/*.py")]
    if path.name != "__init__.py"
)

# Keywords whose failure is reported at the subschema that carries them (their error's `schema`).
FAILING = (
    "type",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "maxProperties",
    "required",
    "dependentRequired",
)


def _subschemas(schema: dict[str, Any], path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _subschemas(sub, f"{path}.{name}")
    for keyword in ("items", "additionalProperties", "propertyNames"):
        sub = schema.get(keyword)
        if isinstance(sub, dict):
            yield from _subschemas(sub, f"{path}.<{keyword}>")


def _uncovered(schema: dict[str, Any]) -> list[str]:
    missing = []
    for path, sub in _subschemas(schema):
        failing = [keyword for keyword in FAILING if keyword in sub]
        if sub.get("additionalProperties") is False:
            failing.append("additionalProperties")
        messages = sub.get("x-messages", {})
        for keyword in failing:
            if keyword not in messages and "x-message" not in sub:
                missing.append(f"{path}: {keyword}")
    return missing


@pytest.mark.parametrize(
    "schema", [AGENT_CONFIG_SCHEMA, TOOL_DEFINITION_SCHEMA], ids=["agent config", "HTTP tool definition"]
)
def test_every_constraint_of_the_agent_config_and_tool_definitions_has_its_own_message(schema):
    assert _uncovered(schema) == []


def _api_inputs() -> Iterator[tuple[str, Input[Any]]]:
    for module in API_MODULES:
        for name, value in vars(importlib.import_module(module)).items():
            if isinstance(value, Input):
                yield f"{module}.{name}", value


def test_every_field_of_every_api_body_has_its_own_message():
    inputs = list(_api_inputs())
    assert len(inputs) >= 15  # the sweep found the API's bodies
    assert {"conversations.apis", "runs.apis.create"} <= set(API_MODULES)
    missing = [
        f"{where}.{prop.name}"
        for where, body in inputs
        for prop in body.properties
        if "x-message" not in prop.schema and "x-messages" not in prop.schema
    ]
    assert missing == []


SCHEMA_SPEAK = ("$.", "^", "must be of type", "string", "integer", "boolean", "must match", "is not in the expected")


def _refusal(call: Any) -> str:
    with pytest.raises(ApiError) as refused:
        call()
    message = refused.value.message
    assert not any(word in message for word in SCHEMA_SPEAK), message
    return message


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"tools": {"max_tool_rounds": 6}}, "Max tool rounds is a whole number from 1 to 5."),
        ({"tools": {"max_tool_rounds": "three"}}, "Max tool rounds is a whole number from 1 to 5."),
        ({"tools": {"approval_expires_minutes": 0}}, "The approval wait is a whole number of minutes"),
        ({"variables": {"Shop Name": "Acme"}}, "A variable name starts with a lower-case letter"),
        ({"variables": {"shop": 7}}, "A variable's value is text"),
        ({"colour": "red"}, "Not known: colour."),
        ({"model": {"name": "x"}}, "Choose a model provider."),
        ({"model": {"provider": "openai_compatible", "base_url": "https://llm.example.com"}}, "API key secret"),
        (
            {"model": {"provider": "openai_compatible", "base_url": "http://x.example", "api_key_secret": "K"}},
            "https:// address",
        ),
        ({"model": {"provider": "openai_compatible", "api_key_secret": "my key"}}, "like OPENAI_KEY"),
        ({"model": {"provider": "demo", "temperature": 3}}, "The temperature is a number from 0 to 2."),
        ({"tools": {"builtin": {"refund": {}}}}, "The built-in tools are create_ticket"),
        ({"tools": {"builtin": {"create_ticket": {"rules": "x" * 4001}}}}, "Rules are text of at most 4000"),
        ({"tools": {"http": [{"tool": "Orders"}]}}, "the name of one of your HTTP tools"),
        ({"tools": {"client": [{"name": "open_cart"}]}}, "A client tool needs a name and a description."),
        ({"tools": {"client": [{"name": "Open Cart", "description": "d"}]}}, "like open_cart"),
        ({"tools": {"client": [{"name": "a", "description": "d", "parameters": {"type": "array"}}]}}, "of type object"),
        ({"business_hours": {"timezone": "Mars/Olympus"}}, "not a time zone we know"),
        ({"business_hours": {"weekly": []}}, "Business hours need a time zone."),
        (
            {"business_hours": {"timezone": "UTC", "weekly": [{"day": "mon", "open": "9", "close": "17:00"}]}},
            "Write the opening time as HH:MM",
        ),
        ({"business_hours": {"timezone": "UTC", "closed_dates": ["2027-02-30"]}}, "not a date on the calendar"),
        ({"instructions": "x" * 20001}, "The instructions are text of at most 20,000 characters."),
        ({"greeting": None}, "The greeting is text of at most 500 characters."),
        ({"tools": {"client": [{"description": "d"}]}}, "A client tool needs a name and a description. Missing: name."),
    ],
)
def test_a_refused_agent_config_says_what_is_wrong_in_plain_words(config, says):
    assert says in _refusal(lambda: validate_config(config))


TOOL = {
    "name": "order_status",
    "description": "Looks up an order.",
    "effect": "read",
    "config": {"method": "GET", "url": "https://api.example.com/orders"},
}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"name": "Order Status"}, "like order_status"),
        ({"description": ""}, "Describe what the tool does"),
        ({"effect": "write"}, "The effect is read or action."),
        ({"config": {"method": "GET"}}, "The call needs a method and a URL. Missing: url."),
        ({"config": {"method": "FETCH", "url": "https://api.example.com/x"}}, "GET, POST, PUT, PATCH or DELETE"),
        ({"config": {"method": "GET", "url": "https://api.example.com/x", "timeout_ms": 5}}, "milliseconds"),
        ({"config": {"method": "GET", "url": "https://api.example.com/x", "retries": 3}}, "Not known: retries."),
        (
            {"config": {"method": "GET", "url": "https://api.example.com/x", "response": {"fields": [{"path": "a"}]}}},
            "Each response field has a path and a label.",
        ),
    ],
)
def test_a_refused_tool_definition_says_what_is_wrong_in_plain_words(change, says):
    assert says in _refusal(lambda: validate_http_tool({**TOOL, **change}))
