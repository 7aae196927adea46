"""The base class of every `/v1` view, and list pagination."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any, TypeVar

from django.core.exceptions import RequestDataTooBig
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from rest_framework.exceptions import ParseError
from rest_framework.request import Request
from rest_framework.views import APIView

from kagent import throttle
from kagent.auth import NOT_AUTHENTICATED, PUBLISHABLE_REFUSED, KeyRefused, api_key_from_header
from kagent.converters import ID_PATTERN
from kagent.cors import OriginRefused, origin_check
from kagent.errors import OUTAGES, ApiError, Unprocessable, error_body, unavailable_response
from kagent.models import ApiKey, Project
from kagent.parsers import strict_json
from kagent.sql import Alongside

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=Model)

MAX_LIMIT = 100
# linear: anchored, bounded length
CURSOR_RE = re.compile(rf"^{ID_PATTERN}(?!\n)$")
DEFAULT_LIMIT = 20


class ProjectApi(APIView):
    """Resolves the project from the API key once; every selector a subclass calls takes `self.project`.

    A publishable key is refused unless the subclass sets `publishable_allowed = True`.
    """

    publishable_allowed = False

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication, permissions
        throttle.api_request(self.api_key)

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


# --- the one hot endpoint without DRF's request cycle -------------------------------------------------------------

_ACCEPTS_JSON = ("application/json", "application/*", "*/*")


def json_response(body: Any, status: int) -> HttpResponse:
    """What DRF's JSONRenderer (UNICODE_JSON, COMPACT_JSON, STRICT_JSON) sends, byte for byte."""
    content = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    response = HttpResponse(content, status=status, content_type="application/json")
    response["Vary"] = "Accept"
    return response


def json_body(request: HttpRequest) -> Any:
    """The request's JSON body (`strict_json`; an empty body is `{}`), parsed once per request: a look at it before
    authentication (`lean_post`'s `alongside`) and the parse after it share the work. Raises what the parser raises
    (ParseError; RequestDataTooBig from reading the body), each time it is asked."""
    cached: tuple[Any, ParseError | None] | None = getattr(request, "_kagent_json", None)
    if cached is None:
        raw = request.body
        try:
            cached = (strict_json(raw) if raw else {}, None)
        except ParseError as exc:
            cached = (None, exc)
        request._kagent_json = cached  # type: ignore[attr-defined]
    data, error = cached
    if error is not None:
        raise error
    return data


def lean_post(
    request: HttpRequest,
    handle: Callable[[ApiKey, Any], tuple[Any, int] | HttpResponseBase],
    *,
    publishable_allowed: bool,
    alongside: Callable[[HttpRequest], Alongside | None] | None = None,
) -> HttpResponseBase:
    """Runs `handle(api_key, body)` for a POST the way `ProjectApi` would — the same authentication, permission,
    JSON parser, errors and rendering — without DRF's request wrapping and negotiation, which cost more than the
    rest of `POST /v1/runs` together. Only for that endpoint. `handle` returns (body, status) to render, or a
    response of its own (an event stream). `alongside(request)`: what to read with the key (kagent.sql.Alongside),
    from a look at the request that must never raise (a request it can't make sense of reads nothing alongside,
    and fails where it would have anyway)."""
    try:
        try:
            also = alongside(request) if alongside is not None else None
            key = api_key_from_header(request.META.get("HTTP_AUTHORIZATION", ""), also)
        except KeyRefused as refused:
            raise ApiError(refused.code, refused.message, status=401) from None
        if key is None:
            response = json_response(error_body("authentication_required", NOT_AUTHENTICATED), 401)
            response["WWW-Authenticate"] = 'Bearer realm="api"'
            return response
        try:
            origin_check(request, key)
        except OriginRefused as refused:
            raise ApiError("origin_not_allowed", str(refused), status=403) from None
        if not (key.is_secret or publishable_allowed):
            raise ApiError("publishable_key_not_allowed", PUBLISHABLE_REFUSED, status=403)
        throttle.api_request(key)
        accept = request.META.get("HTTP_ACCEPT", "")
        if accept and not any(kind in accept for kind in (*_ACCEPTS_JSON, "text/event-stream")):
            raise ApiError("not_acceptable", "Could not satisfy the request Accept header.", status=406)
        content_type = request.META.get("CONTENT_TYPE", "")
        raw = request.body
        if raw and content_type.split(";")[0].strip().lower() != "application/json":
            message = f'Unsupported media type "{content_type}" in request.'
            raise ApiError("unsupported_media_type", message, status=415)
        try:
            data = json_body(request)
        except ParseError as exc:
            raise ApiError("invalid_json", str(exc.detail), status=400) from None
        handled = handle(key, data)
        if isinstance(handled, HttpResponseBase):
            return handled
        body, status = handled
        return json_response(body, status)
    except ApiError as exc:
        response = json_response(error_body(exc.code, exc.message, exc.details), exc.status)
        for name, value in exc.headers.items():
            response[name] = value
        return response
    except RequestDataTooBig:
        return json_response(error_body("request_too_large", "The request body is too large."), 413)
    except OUTAGES:
        return unavailable_response(request.path)
    except Exception:
        logger.exception("unhandled error on %s", request.path)
        return json_response(error_body("internal_error", "Something went wrong on our side."), 500)


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
