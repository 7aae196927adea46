"""Each object the API returns is described once: its fields, each a JSON Schema and the way to read it from the
model. The description renders the object and is its component in the OpenAPI document, so the two can't drift.

    RUN = Resource("Run", {
        "id": Field({"type": "string"}, lambda run: run.pk),
        "object": Const("run"),
        "created_at": Timestamp("created_at"),
    })
    RUN.render(run)        # {"id": "run_…", "object": "run", "created_at": 1791272520}
    RUN.ref                # {"$ref": "#/components/schemas/Run"}

The test suite switches on `Resource.check_renders`: then every rendered object is validated against its own
schema, so a field added to one side only fails the tests that render it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from operator import attrgetter
from typing import Any, ClassVar, Generic, TypeVar

from jsonschema import Draft202012Validator

from kagent.openapi import component, registered_components

T = TypeVar("T")


def unix(value: datetime | None) -> int | None:
    """Timestamps are Unix seconds in the API."""
    return int(value.timestamp()) if value is not None else None


OMIT: Any = object()  # what an optional field's getter returns to leave the key out


class Field:
    """One field: its schema and how it is read from the object (an attribute name or a function). An optional
    field is left out where its getter returns OMIT."""

    def __init__(self, schema: dict[str, Any], source: str | Callable[[Any], Any], *, optional: bool = False) -> None:
        self.schema = schema
        self.get: Callable[[Any], Any] = attrgetter(source) if isinstance(source, str) else source
        self.optional = optional


def Const(value: str) -> Field:  # noqa: N802 - reads as a type in a field table
    return Field({"const": value}, lambda _obj: value)


def Timestamp(attribute: str, *, nullable: bool = False, description: str = "") -> Field:  # noqa: N802
    read = attrgetter(attribute)
    schema = {
        "type": ["integer", "null"] if nullable else "integer",
        "description": f"Unix seconds: {description}" if description else "Unix seconds",
    }
    return Field(schema, lambda obj: unix(read(obj)))


class Resource(Generic[T]):
    check_renders: ClassVar[bool] = False  # the tests turn this on

    def __init__(self, name: str, fields: Mapping[str, Field], *, description: str = "") -> None:
        self.name = name
        self.fields = dict(fields)
        schema: dict[str, Any] = {
            "type": "object",
            "required": [key for key, field in self.fields.items() if not field.optional],
            "properties": {key: field.schema for key, field in self.fields.items()},
        }
        if description:
            schema["description"] = description
        self.schema = schema
        self.ref = component(name, schema)
        self._validator: Draft202012Validator | None = None
        self._optional = any(field.optional for field in self.fields.values())

    def render(self, obj: T) -> dict[str, Any]:
        rendered = {key: field.get(obj) for key, field in self.fields.items()}
        if self._optional:
            rendered = {key: value for key, value in rendered.items() if value is not OMIT}
        if Resource.check_renders:
            self._check(rendered)
        return rendered

    def _check(self, rendered: dict[str, Any]) -> None:
        if self._validator is None:
            self._validator = validator(self.schema)
        check_rendered(self._validator, self.name, rendered)


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of `schema` whose `#/components/schemas/X` references resolve inside the document itself."""
    return Draft202012Validator({**schema, "components": {"schemas": registered_components()}})


def check_rendered(checker: Draft202012Validator, name: str, rendered: Any) -> None:
    """The tests' check of a rendered object (with `Resource.check_renders` on): an AssertionError naming where."""
    errors = list(checker.iter_errors(rendered))
    if errors:
        where = "/".join(map(str, errors[0].absolute_path))
        raise AssertionError(f"{name} rendered outside its schema at {where or '$'}: {errors[0].message}")
