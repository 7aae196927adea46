"""Objects described once: a Resource renders its fields and is its own OpenAPI component; under the tests every
rendering is checked against that schema."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from kagent.openapi import registered_components
from kagent.rendering import OMIT, Const, Field, Resource, Timestamp

WIDGET: Resource[SimpleNamespace] = Resource(
    "TestWidget",
    {
        "id": Field({"type": "string"}, "pk"),
        "object": Const("widget"),
        "size": Field({"type": "integer"}, lambda w: w.size * 2),
        "extra": Field({"type": "string"}, lambda w: w.extra or OMIT, optional=True),
        "created_at": Timestamp("created_at"),
        "seen_at": Timestamp("seen_at", nullable=True),
    },
)
WHEN = datetime(2026, 12, 1, tzinfo=UTC)


def widget(**changes: object) -> SimpleNamespace:
    return SimpleNamespace(**{"pk": "w_1", "size": 2, "extra": "", "created_at": WHEN, "seen_at": None, **changes})


def test_renders_each_field_in_order() -> None:
    assert WIDGET.render(widget()) == {
        "id": "w_1",
        "object": "widget",
        "size": 4,
        "created_at": int(WHEN.timestamp()),
        "seen_at": None,
    }
    assert WIDGET.render(widget(extra="x"))["extra"] == "x"


def test_is_its_own_component() -> None:
    assert WIDGET.ref == {"$ref": "#/components/schemas/TestWidget"}
    schema = registered_components()["TestWidget"]
    assert schema["required"] == ["id", "object", "size", "created_at", "seen_at"]
    assert schema["properties"]["object"] == {"const": "widget"}


def test_a_rendering_outside_the_schema_fails_under_the_tests() -> None:
    assert Resource.check_renders  # switched on by tests/conftest.py
    with pytest.raises(AssertionError, match="TestWidget rendered outside its schema at size"):
        WIDGET.render(widget(size="big"))
