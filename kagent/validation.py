"""JSON Schema validation with errors as the API reports them: `[{"path": "$.a.b", "message": "..."}]`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

MAX_MESSAGE = 200


def make_validator(schema: dict[str, Any]) -> Draft202012Validator:
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def short_message(error: ValidationError) -> str:
    # jsonschema's messages repeat the offending value; keep them short so a huge value isn't echoed back.
    if error.validator == "additionalProperties":
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        extra = (
            sorted(set(error.instance) - set(schema.get("properties", {}))) if isinstance(error.instance, dict) else []
        )
        return f"unknown field(s): {', '.join(map(str, extra))[:MAX_MESSAGE]}"
    if error.validator in ("maxLength", "minLength"):
        return f"length must be {'at most' if error.validator == 'maxLength' else 'at least'} {error.validator_value}"
    if error.validator in ("maximum", "minimum"):
        return f"must be {'at most' if error.validator == 'maximum' else 'at least'} {error.validator_value}"
    if error.validator == "enum":
        allowed = error.validator_value if isinstance(error.validator_value, list) else []
        return f"must be one of {', '.join(map(str, allowed))}"
    if error.validator == "type":
        return f"must be of type {error.validator_value}"
    if error.validator == "pattern":
        return f"must match {error.validator_value}"
    message = str(error.message)
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


def schema_errors(validator: Draft202012Validator, instance: Any) -> list[dict[str, str]]:
    errors = sorted(validator.iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    return [{"path": error.json_path, "message": short_message(error)} for error in errors]
