"""The base class of every `/v1` view, and list pagination."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from rest_framework.request import Request
from rest_framework.views import APIView

from kagent import throttle
from kagent.clients import client_address
from kagent.converters import ID_PATTERN
from kagent.errors import ApiError, Unprocessable
from kagent.models import ApiKey, Project

M = TypeVar("M", bound=Model)

MAX_LIMIT = 100
# linear: anchored, bounded length
CURSOR_RE = re.compile(rf"^{ID_PATTERN}(?!\n)$")
DEFAULT_LIMIT = 20


class ProjectApi(APIView):
    """The one request pipeline of `/v1`, for every operation (`POST /v1/runs` too): DRF's request cycle with the
    API key's authentication and permission (kagent.auth), the request limit (`initial`), the strict JSON parser
    (kagent.parsers), the error JSON (kagent.errors) and the JSON renderer. Resolves the project from the API key
    once; every selector a subclass calls takes `self.project`. The body is read only when the operation asks for
    `request.data`, so never before the key and the limit let the request through (tests/kagent/
    test_before_authentication.py holds every operation of the OpenAPI document to that).

    A publishable key is refused unless the subclass sets `publishable_allowed = True`.
    """

    publishable_allowed = False

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication, permissions
        throttle.api_request(self.api_key, address=client_address(request._request))

    @property
    def project(self) -> Project:
        return self.api_key.project

    @property
    def api_key(self) -> ApiKey:
        key = self.request.auth
        assert isinstance(key, ApiKey)  # guaranteed by SecretKeyRequired
        return key


def parse_limit(request: Request) -> int:
    raw = request.query_params.get("limit")
    if raw is None:
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except ValueError:
        raise ApiError("invalid_parameter", "limit must be an integer from 1 to 100.") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise ApiError("invalid_parameter", "limit must be an integer from 1 to 100.")
    return limit


def paginate(request: Request, queryset: QuerySet[M], render: Callable[[M], dict[str, Any]]) -> dict[str, Any]:
    """`{"data": [...], "next": cursor|null}`, newest first.

    Ids are time-sortable, so the cursor is simply the last id returned.
    """
    limit = parse_limit(request)
    cursor = request.query_params.get("cursor")
    queryset = queryset.order_by("-pk")
    if cursor is not None and not CURSOR_RE.match(cursor):
        raise ApiError("invalid_parameter", "cursor is the `next` value of a previous page.")
    if cursor:
        queryset = queryset.filter(pk__lt=cursor)
    rows: list[M] = list(queryset[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return {"data": [render(row) for row in rows], "next": str(rows[-1].pk) if more and rows else None}


# --- query parameters: one reading for the API and the dashboard's filter forms --------------------------------


def param_choice(params: Mapping[str, str], name: str, choices: Sequence[str]) -> str | None:
    """An optional parameter with a fixed set of values (an empty value reads as not given)."""
    raw = params.get(name) or None
    if raw is not None and raw not in choices:
        raise Unprocessable("invalid_parameter", f"{name} is one of {', '.join(choices)}.")
    return raw


def param_bool(params: Mapping[str, str], name: str) -> bool | None:
    raw = params.get(name) or None
    if raw is None:
        return None
    if raw not in ("true", "false"):
        raise Unprocessable("invalid_parameter", f"{name} is true or false.")
    return raw == "true"


def param_text(params: Mapping[str, str], name: str, *, max_length: int = 255) -> str | None:
    raw = (params.get(name) or "").strip()
    if len(raw) > max_length:
        raise Unprocessable("invalid_parameter", f"{name} is at most {max_length} characters.")
    return raw or None


def param_time(params: Mapping[str, str], name: str) -> datetime | None:
    """Unix seconds, or an ISO 8601 date or date-time (UTC unless it says otherwise): `created_after=1791272520`
    and `created_after=2026-01-31` both work, so a date picker's value needs no translation."""
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    problem = f"{name} is Unix seconds or a date like 2026-01-31 (or 2026-01-31T09:30:00Z)."
    if re.fullmatch(r"[0-9]{1,12}", raw):  # linear: one class, at most 12 characters
        try:
            return datetime.fromtimestamp(int(raw), tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise Unprocessable("invalid_parameter", problem) from None
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00")) if "T" in raw else None
        if parsed is None:
            parsed = datetime.combine(date.fromisoformat(raw), datetime.min.time())
    except ValueError:
        raise Unprocessable("invalid_parameter", problem) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def paginate_numbered(
    request: Request, queryset: QuerySet[M], render: Callable[[M], dict[str, Any]], *, prefix: str
) -> dict[str, Any]:
    """`paginate` for rows numbered by the database rather than given one of our ids (the egress log): the cursor
    is `<prefix>_<number>`, the rendered id of the last row."""
    limit = parse_limit(request)
    cursor = request.query_params.get("cursor")
    queryset = queryset.order_by("-pk")
    if cursor is not None:
        number = cursor.removeprefix(f"{prefix}_")
        if number == cursor or not (number.isascii() and number.isdigit()) or len(number) > 19:
            raise ApiError("invalid_parameter", "cursor is the `next` value of a previous page.")
        queryset = queryset.filter(pk__lt=int(number))
    rows: list[M] = list(queryset[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return {"data": [render(row) for row in rows], "next": f"{prefix}_{rows[-1].pk}" if more and rows else None}
