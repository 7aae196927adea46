"""Parsing at the edge: one error per request, in the schema's order, with the product's codes and messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kagent.errors import ApiError, Unprocessable
from kagent.inputs import UNSET, Input, is_set


@dataclass(frozen=True)
class Thing:
    name: str
    size: int | None
    tags: dict[str, Any]
    note: str | None


THING = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "x-message": "name is a non-empty string."},
            "size": {"type": "integer", "minimum": 1, "x-code": "invalid_size"},
            "tags": {
                "type": "object",
                "maxProperties": 2,
                "additionalProperties": {"type": "string", "maxLength": 3},
                "default": {},
                "x-code": "invalid_tags",
                "x-message": "tags is an object.",
                "x-messages": {"maxProperties": "at most 2 tags.", "additionalProperties/maxLength": "short tags."},
            },
            "note": {"type": ["string", "null"], "default": ""},
        },
    },
    Thing,
)


def failure(data: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        THING.parse(data, **kwargs)
    return caught.value


def test_a_valid_body_becomes_the_typed_input_with_defaults() -> None:
    assert THING.parse({"name": "a"}) == Thing(name="a", size=None, tags={}, note="")
    assert THING.parse({"name": "a", "size": 3, "tags": {"x": "y"}, "note": None}) == Thing("a", 3, {"x": "y"}, None)


def test_defaults_are_not_shared_between_requests() -> None:
    first = THING.parse({"name": "a"})
    first.tags["changed"] = "yes"
    assert THING.parse({"name": "b"}).tags == {}


def test_not_an_object() -> None:
    for body in ([], "x", None, 5):
        error = failure(body)
        assert error.code == "invalid_request" and error.status == 400


def test_unknown_fields_come_first_and_are_all_named() -> None:
    error = failure({"zeta": 1, "alpha": 2, "size": "not even checked"})
    assert isinstance(error, Unprocessable)
    assert error.code == "invalid_request"
    assert error.message == "Unknown field(s): alpha, zeta."
    assert [d["path"] for d in error.details] == ["$.alpha", "$.zeta"]


def test_required_and_custom_message() -> None:
    error = failure({})
    assert (error.code, error.message, error.details) == (
        "invalid_request",
        "name is a non-empty string.",
        [{"path": "$.name", "message": "required"}],
    )
    assert failure({"name": ""}).message == "name is a non-empty string."


def test_first_failing_field_in_schema_order_with_its_code() -> None:
    error = failure({"name": "a", "size": 0, "tags": []})
    assert error.code == "invalid_size"
    assert error.details == [{"path": "$.size", "message": "must be at least 1"}]
    assert error.message == "size: must be at least 1"


def test_messages_by_failing_keyword() -> None:
    assert failure({"name": "a", "tags": {"a": "1", "b": "2", "c": "3"}}).message == "at most 2 tags."
    too_long = failure({"name": "a", "tags": {"a": "long"}})
    assert too_long.code == "invalid_tags" and too_long.message == "short tags."
    assert too_long.details[0]["path"] == "$.tags.a"
    assert failure({"name": "a", "tags": "x"}).message == "tags is an object."


def test_null_for_an_optional_field_reads_as_not_sent() -> None:
    assert THING.parse({"name": "a", "size": None, "tags": None}) == Thing("a", None, {}, "")
    # where null is a value of its own, it is kept
    assert THING.parse({"name": "a", "note": None}).note is None


def test_partial_bodies_for_patch() -> None:
    patch = THING.parse({"size": 2}, partial=True)
    assert patch.size == 2 and patch.name is UNSET and not is_set(patch.tags)
    assert failure({"size": None}, partial=True).code == "invalid_size"  # null is not "no change"
    assert failure({"what": 1}, partial=True).code == "invalid_request"


def test_messages_never_echo_a_huge_value() -> None:
    error = failure({"name": "a", "size": "9" * 10_000})
    assert len(error.message) < 300 and len(str(error.details)) < 300


def test_the_docs_show_the_schema_without_the_message_keys() -> None:
    schema = THING.body["application/json"]
    assert "x-message" not in str(schema) and "x-code" not in str(schema)
    assert schema["properties"]["tags"]["maxProperties"] == 2


def test_the_dataclass_and_the_schema_name_the_same_fields() -> None:
    @dataclass
    class Other:
        name: str

    with pytest.raises(AssertionError):
        Input({"type": "object", "properties": {"title": {"type": "string"}}}, Other)
