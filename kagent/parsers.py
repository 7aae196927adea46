"""The one JSON parser of the API. Hostile bodies are a 400 with a clear code, never a 500 further down:
no NUL characters or lone surrogates (PostgreSQL and UTF-8 refuse them), no NaN/Infinity, no absurd nesting."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 32


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _check_text(text: str) -> None:
    if "\x00" in text:
        raise ParseError("Strings may not contain the NUL character (\\u0000).")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ParseError("Strings may not contain unpaired surrogates; send valid UTF-8 text.") from None


def check_json_value(value: Any, depth: int = 0) -> None:
    """Raises ParseError for what the database or the engine can't hold."""
    if depth > MAX_DEPTH:
        raise ParseError(f"The JSON is nested more than {MAX_DEPTH} levels deep.")
    if isinstance(value, str):
        _check_text(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key)
            check_json_value(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            check_json_value(item, depth + 1)
    elif isinstance(value, float) and value != value:  # NaN can't arrive (parse_constant), but be sure
        raise ParseError("NaN is not a JSON number.")


def strict_json(raw: bytes) -> Any:
    """The body's JSON value, or ParseError (400 `invalid_json`)."""
    try:
        text = raw.decode("utf-8")
        data = json.loads(text, parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise ParseError("The body is not UTF-8.") from None
    except RecursionError:
        raise ParseError(f"The JSON is nested more than {MAX_DEPTH} levels deep.") from None
    except ValueError as exc:
        raise ParseError(f"The body is not valid JSON: {str(exc)[:200]}") from None
    if isinstance(data, float) and data in (float("inf"), float("-inf")):
        raise ParseError("Infinity is not a JSON number.")
    _check_numbers(data)
    check_json_value(data)
    return data


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return strict_json(stream.read() if stream is not None else b"")


def _check_numbers(value: Any, depth: int = 0) -> None:
    # 1e400 parses as a float infinity without going through parse_constant.
    if depth > MAX_DEPTH:
        raise ParseError(f"The JSON is nested more than {MAX_DEPTH} levels deep.")
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        raise ParseError("Numbers must be finite.")
    if isinstance(value, dict):
        for item in value.values():
            _check_numbers(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_numbers(item, depth + 1)
