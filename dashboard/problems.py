"""Errors next to their fields. A service or an API input raises `ApiError` with the JSON path of what it refuses
(`details[0]["path"]`, e.g. `$.tools.max_tool_rounds`); a page names each of its fields by the path it fills, so
the message (the API's own, word for word) lands next to the field that path names, or the nearest one above it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.http import QueryDict
from rest_framework.exceptions import ParseError

from kagent.errors import ApiError, Unprocessable
from kagent.parsers import check_json_value

FORM = "$"  # a problem no field owns: shown at the top of the form


def field_id(path: str) -> str:
    """The HTML id of the field that fills `path` (`$.tools.max_tool_rounds` -> `f-tools-max_tool_rounds`)."""
    # linear: one class, repeated
    return "f" + re.sub(r"[^A-Za-z0-9_]+", "-", path.removeprefix("$")).rstrip("-")


def _parent(path: str) -> str:
    if path.endswith("]"):
        return path[: path.rindex("[")]
    return path[: path.rindex(".")] if "." in path else FORM


@dataclass
class Problems:
    """What a form post was refused for: at most one message per field path."""

    by_path: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_path)

    def at(self, path: str) -> str | None:
        return self.by_path.get(path)

    def add(self, path: str, message: str) -> None:
        self.by_path.setdefault(path, message)

    @property
    def summary(self) -> list[tuple[str, str]]:
        """(field id, message) for the list at the top of the form, in the form's order of discovery."""
        return [(field_id(path) if path != FORM else "", message) for path, message in self.by_path.items()]


def error_path(exc: ApiError) -> str:
    """The JSON path an ApiError names (`$` if none), relative to the body: `$.config.x` and `$.x` alike."""
    details = exc.details
    path = FORM
    if isinstance(details, list) and details and isinstance(details[0], dict):
        path = str(details[0].get("path") or FORM)
    return path


def problems_from(
    exc: ApiError, fields: Iterable[str], *, translate: Callable[[str], str] = lambda path: path
) -> Problems:
    """`exc`'s message at the field whose path is the error's path, or the nearest field above it."""
    known = set(fields)
    path = translate(error_path(exc))
    while path != FORM and path not in known:
        path = _parent(path)
    problems = Problems()
    problems.add(path, exc.message)
    return problems


def refuse_unstorable(post: QueryDict) -> None:
    """Raises the API parser's refusal (`Unprocessable` at the field's path) for a posted value the database can't
    hold (a NUL character): the API never lets one through its JSON parser, a form post has no such parser."""
    for name, values in post.lists():
        try:
            check_json_value(values)
        except ParseError as exc:
            message = str(exc.detail)
            raise Unprocessable("invalid_request", message, details=[{"path": name, "message": message}]) from None
