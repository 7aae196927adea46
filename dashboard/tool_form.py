"""The HTTP tool editor's form: a definition as form fields, a post back as a definition, and the sample values the
preview and the test call use. Parsing only; the rules are `tools.validation`'s, reached through the API's services.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict

from dashboard.problems import Problems
from tools.models import HttpTool

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
STARTER_PARAMETERS = {
    "type": "object",
    "properties": {"order_number": {"type": "string", "description": "The order number, e.g. 8812"}},
    "required": ["order_number"],
    "additionalProperties": False,
}
FIELD_PATHS = (
    "$.name",
    "$.description",
    "$.effect",
    "$.requires_verified_user",
    "$.config.method",
    "$.config.url",
    "$.config.headers",
    "$.config.body",
    "$.config.parameters",
    "$.config.response.items_path",
    "$.config.response.fields",
    "$.config.response.max_items",
    "$.config.response.empty_message",
    "$.config.timeout_ms",
)
LABELS = {
    "$.name": "Name",
    "$.description": "Description",
    "$.effect": "Effect",
    "$.config.method": "Method",
    "$.config.url": "URL",
    "$.config.headers": "Headers",
    "$.config.body": "Body",
    "$.config.parameters": "Parameters",
    "$.config.response.items_path": "Items path",
    "$.config.response.fields": "Fields shown to the model",
    "$.config.response.max_items": "Max items",
    "$.config.response.empty_message": "Message when empty",
    "$.config.timeout_ms": "Timeout",
    "$.requires_verified_user": "Requires a verified customer",
}


def _text(post: Mapping[str, str], key: str) -> str:
    return str(post.get(key, "")).replace("\r\n", "\n")


def text_pairs(post: QueryDict, first: str, second: str) -> list[tuple[str, str]]:
    a, b = post.getlist(first), post.getlist(second)
    rows = [(a[i].strip() if i < len(a) else "", b[i] if i < len(b) else "") for i in range(max(len(a), len(b)))]
    return [(x, y) for x, y in rows if x or y.strip()]


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) if value is not None else ""


@dataclass
class SampleArgument:
    name: str
    type: str
    description: str
    required: bool
    value: str

    @property
    def path(self) -> str:
        return f"$.sample.arguments.{self.name}"


@dataclass
class ToolValues:
    """What the editor's fields hold, as typed."""

    name: str = ""
    description: str = ""
    effect: str = "read"
    requires_verified_user: bool = False
    method: str = "GET"
    url: str = "https://"
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: str = ""
    parameters: str = _pretty(STARTER_PARAMETERS)
    items_path: str = ""
    fields: list[tuple[str, str]] = field(default_factory=list)
    max_items: str = ""
    empty_message: str = ""
    timeout_ms: str = ""
    sample_values: dict[str, str] = field(default_factory=dict)
    sample_customer: str = ""
    sample_traits: str = ""
    sample_variables: str = ""

    def sample_arguments(self) -> list[SampleArgument]:
        """One sample field per declared parameter (none while the parameters aren't readable JSON)."""
        try:
            schema = json.loads(self.parameters) if self.parameters.strip() else {}
        except json.JSONDecodeError:
            return []
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict):
            return []
        required_list = schema.get("required")
        required = required_list if isinstance(required_list, list) else []
        return [
            SampleArgument(
                name=str(name),
                type=str(spec.get("type", "string")) if isinstance(spec, dict) else "string",
                description=str(spec.get("description", "")) if isinstance(spec, dict) else "",
                required=name in required,
                value=self.sample_values.get(str(name), ""),
            )
            for name, spec in list(properties.items())[:20]
        ]


def values_from_tool(tool: HttpTool) -> ToolValues:
    config = tool.config
    response = config.get("response") or {}
    return ToolValues(
        name=tool.name,
        description=tool.description,
        effect=tool.effect,
        requires_verified_user=tool.requires_verified_user,
        method=str(config.get("method", "GET")),
        url=str(config.get("url", "")),
        headers=[(str(k), str(v)) for k, v in (config.get("headers") or {}).items()],
        body=_pretty(config.get("body")),
        parameters=_pretty(config.get("parameters")),
        items_path=str(response.get("items_path", "")),
        fields=[(str(f.get("path", "")), str(f.get("label", ""))) for f in response.get("fields", [])],
        max_items=str(response.get("max_items", "")),
        empty_message=str(response.get("empty_message", "")),
        timeout_ms=str(config.get("timeout_ms", "")),
    )


def values_from_post(post: QueryDict) -> ToolValues:
    prefix = "$.sample.arguments."
    return ToolValues(
        name=_text(post, "$.name").strip(),
        description=_text(post, "$.description"),
        effect=_text(post, "$.effect"),
        requires_verified_user=post.get("$.requires_verified_user") == "on",
        method=_text(post, "$.config.method"),
        url=_text(post, "$.config.url").strip(),
        headers=text_pairs(post, "$.config.headers.name", "$.config.headers.value"),
        body=_text(post, "$.config.body"),
        parameters=_text(post, "$.config.parameters"),
        items_path=_text(post, "$.config.response.items_path").strip(),
        fields=text_pairs(post, "$.config.response.fields.path", "$.config.response.fields.label"),
        max_items=_text(post, "$.config.response.max_items").strip(),
        empty_message=_text(post, "$.config.response.empty_message"),
        timeout_ms=_text(post, "$.config.timeout_ms").strip(),
        sample_values={key.removeprefix(prefix): str(value) for key, value in post.items() if key.startswith(prefix)},
        sample_customer=_text(post, "$.sample.customer").strip(),
        sample_traits=_text(post, "$.sample.traits"),
        sample_variables=_text(post, "$.sample.variables"),
    )


def _json(text: str, path: str, what: str, problems: Problems) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        problems.add(path, f"{what} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).")
        return None


MAX_NUMBER_DIGITS = 18  # more is past every field's maximum (and past a bigint); int() refuses over 4300


def number_or_text(text: str) -> Any:
    # Decimal digits (any script's, which int() reads; not ² and the like, which isdigit() takes) become a number;
    # anything else goes to the definition's own check as typed.
    return int(text) if text.isdecimal() and len(text) <= MAX_NUMBER_DIGITS else text


def definition_from_values(values: ToolValues) -> tuple[dict[str, Any], Problems]:
    """The definition the form asks for, and what could not even be read."""
    problems = Problems()
    headers: dict[str, str] = {}
    for name, value in values.headers:
        if name in headers:
            problems.add("$.config.headers", f"The header {name} is set twice.")
        headers[name] = value
    config: dict[str, Any] = {"method": values.method, "url": values.url, "headers": headers}
    if values.body.strip():
        config["body"] = _json(values.body, "$.config.body", "Body", problems)
    if values.parameters.strip():
        config["parameters"] = _json(values.parameters, "$.config.parameters", "Parameters", problems)
    response: dict[str, Any] = {"fields": [{"path": p, "label": label} for p, label in values.fields]}
    if values.items_path:
        response["items_path"] = values.items_path
    if values.max_items:
        response["max_items"] = number_or_text(values.max_items)
    if values.empty_message.strip():
        response["empty_message"] = values.empty_message
    config["response"] = response
    if values.timeout_ms:
        config["timeout_ms"] = number_or_text(values.timeout_ms)
    definition = {
        "name": values.name,
        "description": values.description,
        "effect": values.effect,
        "requires_verified_user": values.requires_verified_user,
        "config": config,
    }
    return definition, problems


def _sample_value(text: str, kind: str) -> Any:
    """A typed sample as the model would send it: numbers and booleans as JSON, text as text."""
    if kind in ("integer", "number", "boolean"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text


def sample_body(values: ToolValues) -> tuple[dict[str, Any], Problems]:
    """The sample as `POST /v1/tools/{name}/preview` takes it (parsed by the API's own input), and what could not
    even be read."""
    problems = Problems()
    arguments = {
        argument.name: _sample_value(argument.value, argument.type)
        for argument in values.sample_arguments()
        if argument.value != ""
    }
    body: dict[str, Any] = {"arguments": arguments}
    if values.sample_customer:
        traits = (
            _json(values.sample_traits, "$.sample.traits", "Traits", problems) if values.sample_traits.strip() else {}
        )
        body["end_user"] = {"external_id": values.sample_customer, "traits": traits}
    if values.sample_variables.strip():
        body["variables"] = _json(values.sample_variables, "$.sample.variables", "Variables", problems)
    return body, problems
