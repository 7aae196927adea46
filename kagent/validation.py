"""JSON Schema validation with errors as the API reports them: `[{"path": "$.a.b", "message": "..."}]`.

Messages are read by business owners in the dashboard as much as by developers, so they are plain words: a
subschema may carry its own (`x-message`, or `x-messages` by the failing keyword, e.g. `{"maximum": "..."}`), and
the keyword's generic one never quotes a pattern or a JSON type name. `strip_extensions` gives the schema without
them, as the OpenAPI document shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

MAX_MESSAGE = 200
EXTENSIONS = ("x-code", "x-message", "x-messages")

# What a JSON type is called in a message.
_TYPE_WORDS = {
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "object": "a JSON object",
    "array": "a list",
    "null": "null",
}


def strip_extensions(schema: Any) -> Any:
    """The schema as jsonschema and the OpenAPI document see it (our `x-` keys are for messages only)."""
    if isinstance(schema, dict):
        return {k: strip_extensions(v) for k, v in schema.items() if k not in EXTENSIONS}
    if isinstance(schema, list):
        return [strip_extensions(item) for item in schema]
    return schema


def _type_words(value: Any) -> str:
    names = value if isinstance(value, list) else [value]
    return " or ".join(_TYPE_WORDS.get(str(name), str(name)) for name in names)


def make_validator(schema: dict[str, Any]) -> Draft202012Validator:
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def short_message(error: ValidationError) -> str:
    """The keyword's own words, short (a huge value is never echoed back) and without patterns or type names."""
    validator, value = error.validator, error.validator_value
    if validator == "additionalProperties":
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        extra = (
            sorted(set(error.instance) - set(schema.get("properties", {}))) if isinstance(error.instance, dict) else []
        )
        return f"unknown field(s): {', '.join(map(str, extra))[:MAX_MESSAGE]}"
    if validator in ("maxLength", "minLength"):
        if validator == "minLength" and value == 1:
            return "can't be empty"
        return f"must be {'at most' if validator == 'maxLength' else 'at least'} {value} characters long"
    if validator in ("maximum", "minimum"):
        return f"must be {'at most' if validator == 'maximum' else 'at least'} {value}"
    if validator in ("maxItems", "minItems"):
        return f"must have {'at most' if validator == 'maxItems' else 'at least'} {value} items"
    if validator in ("maxProperties", "minProperties"):
        return f"must have {'at most' if validator == 'maxProperties' else 'at least'} {value} entries"
    if validator == "enum":
        allowed = value if isinstance(value, list) else []
        return f"must be one of {', '.join(map(str, allowed))}"
    if validator == "type":
        return f"must be {_type_words(value)}"
    if validator in ("pattern", "propertyNames", "format"):
        return "is not in the expected form"
    if validator == "required":
        names = value if isinstance(value, list) else []
        missing = [name for name in names if isinstance(error.instance, dict) and name not in error.instance]
        return f"{', '.join(map(str, missing)) or 'a field'} is required"
    if validator == "dependentRequired":
        return "a field that goes with another is missing"
    if validator == "uniqueItems":
        return "has the same item twice"
    message = str(error.message)
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


def plain_message(error: ValidationError) -> str | None:
    """The failing subschema's own message (`x-messages` by keyword, else `x-message`), if it has one."""
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    messages = schema.get("x-messages")
    if isinstance(messages, Mapping) and isinstance(messages.get(str(error.validator)), str):
        own = str(messages[str(error.validator)])
        # Which field was not known, or is missing, as the keyword's own message says.
        if error.validator == "additionalProperties":
            own += f" Not known: {short_message(error).removeprefix('unknown field(s): ')}."
        elif error.validator == "required":
            own += f" Missing: {short_message(error).removesuffix(' is required')}."
        return own
    message = schema.get("x-message")
    return str(message) if isinstance(message, str) else None


def _sorted_errors(validator: Draft202012Validator, instance: Any) -> list[ValidationError]:
    return sorted(validator.iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)), e.validator))


def schema_refusal(validator: Draft202012Validator, instance: Any) -> tuple[str, list[dict[str, str]]] | None:
    """None when the instance is valid; else the refusal's message (the first error's: the subschema's own, else
    `<path>: <the keyword's words>`) and every error, in path order, as `{"path", "message"}` (the subschema's own
    message, else the keyword's words)."""
    errors = _sorted_errors(validator, instance)
    if not errors:
        return None
    details = [{"path": e.json_path, "message": plain_message(e) or short_message(e)} for e in errors]
    first = errors[0]
    return plain_message(first) or f"{first.json_path}: {short_message(first)}", details
