"""Parse at the edge. Each API operation describes its body once, as a JSON Schema carrying the product's own
messages; `Input.parse()` checks a body against it and builds the typed object the service takes as keyword
arguments. The same schema is the operation's request body in the OpenAPI document, so the docs can't drift.

Errors are one per request, the first in the schema's property order (unknown fields first), as
`422 {"code", "message", "details": [{"path": "$.field", "message"}]}`. A property may say how its errors read:

- `x-code`: the error code (default: the body's own `x-code`, else `invalid_request`; the body's also applies to
  unknown fields);
- `x-message`: the message for any problem with the field;
- `x-messages`: messages by the failing keyword's schema path, e.g. `{"maxProperties": …, "propertyNames": …,
  "additionalProperties/maxLength": …}` (the longest matching prefix wins over `x-message`).

Business rules (a tool name that clashes, an agent that doesn't exist, one field allowed only with another's
value) stay in the services: this module only knows shapes.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from kagent.errors import ApiError, Unprocessable
from kagent.validation import short_message, strip_extensions

T = TypeVar("T")


class _Unset:
    """A field the request didn't send (PATCH): different from null."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()


def is_set(value: Any) -> bool:
    return value is not UNSET


@dataclasses.dataclass(frozen=True)
class _Property:
    name: str
    schema: dict[str, Any]
    validator: Draft202012Validator
    required: bool
    default_code: str

    def failure(self, error: ValidationError | None) -> Unprocessable:
        path = f"$.{self.name}" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in self._where(error))
        code = self.schema.get("x-code", self.default_code)
        detail = "required" if error is None else short_message(error)
        message = self._message(error) or (
            f"{self.name} is required." if error is None else f"{path[2:]}: {short_message(error)}"
        )
        return Unprocessable(code, message, details=[{"path": path, "message": detail}])

    @staticmethod
    def _where(error: ValidationError | None) -> list[Any]:
        return list(error.absolute_path) if error is not None else []

    def _message(self, error: ValidationError | None) -> str | None:
        messages: Mapping[str, str] = self.schema.get("x-messages", {})
        if error is not None and messages:
            keyword_path = "/".join(str(part) for part in error.relative_schema_path if not isinstance(part, int))
            best = max((key for key in messages if keyword_path.startswith(key)), key=len, default=None)
            if best is not None:
                return messages[best]
        message = self.schema.get("x-message")
        return str(message) if message is not None else None


class Input(Generic[T]):
    """One operation's body: its schema (for parsing and for the docs) and what it is parsed into."""

    def __init__(self, schema: dict[str, Any], into: Callable[..., T]) -> None:
        self.raw_schema = schema
        self.schema: dict[str, Any] = strip_extensions(schema)
        Draft202012Validator.check_schema(self.schema)
        self.into = into
        self.closed = schema.get("additionalProperties") is False
        required = set(schema.get("required", ()))
        self.code = str(schema.get("x-code", "invalid_request"))
        self.properties = tuple(
            _Property(name, prop, Draft202012Validator(strip_extensions(prop)), name in required, self.code)
            for name, prop in schema.get("properties", {}).items()
        )
        if dataclasses.is_dataclass(into):
            fields = {f.name for f in dataclasses.fields(into)}
            declared = {p.name for p in self.properties}
            assert fields == declared, f"{into}: the dataclass and the schema name different fields"

    @property
    def body(self) -> dict[str, dict[str, Any]]:
        """The OpenAPI request body."""
        return {"application/json": self.schema}

    def parse(self, data: Any, *, partial: bool = False) -> T:
        """The typed input, or ApiError. With `partial` (PATCH), nothing is required and absent fields are UNSET."""
        if not isinstance(data, dict) or hasattr(data, "getlist"):
            raise ApiError(
                "invalid_request", "The request body must be a JSON object (Content-Type: application/json)."
            )
        if self.closed:
            unknown = sorted(str(key) for key in data if key not in {p.name for p in self.properties})
            if unknown:
                raise Unprocessable(
                    self.code,
                    f"Unknown field(s): {', '.join(unknown)[:200]}.",
                    details=[{"path": f"$.{name}", "message": "unknown field"} for name in unknown[:20]],
                )
        values: dict[str, Any] = {}
        for prop in self.properties:
            if prop.name not in data:
                if prop.required and not partial:
                    raise prop.failure(None)
                values[prop.name] = UNSET if partial else copy.deepcopy(prop.schema.get("default"))
                continue
            value = data[prop.name]
            if value is None and not prop.required and not partial and not prop.validator.is_valid(None):
                # An optional field sent as null reads as not sent (its default), where null isn't a value of its own.
                values[prop.name] = copy.deepcopy(prop.schema.get("default"))
                continue
            errors = sorted(prop.validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
            if errors:
                raise prop.failure(errors[0])
            values[prop.name] = value
        return self.into(**values)
