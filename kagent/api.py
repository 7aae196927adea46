"""The base class of every `/v1` view, and list pagination."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from rest_framework.request import Request
from rest_framework.views import APIView

from kagent.converters import ID_PATTERN
from kagent.errors import ApiError
from kagent.models import ApiKey, Project

M = TypeVar("M", bound=Model)

MAX_LIMIT = 100
# linear: anchored, bounded length
CURSOR_RE = re.compile(rf"^{ID_PATTERN}$")
DEFAULT_LIMIT = 20


class ProjectApi(APIView):
    """Resolves the project from the API key once; every selector a subclass calls takes `self.project`.

    A publishable key is refused unless the subclass sets `publishable_allowed = True`.
    """

    publishable_allowed = False

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
