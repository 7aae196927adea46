"""One error type for services and one place that turns every error into the error JSON of SPEC §4:

{"error": {"code": "...", "message": "...", "details": ...}}
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError as DatabaseInterfaceError
from django.db import OperationalError as DatabaseOperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, UnreadablePostError
from django.views.decorators.csrf import csrf_exempt
from kombu.exceptions import OperationalError as BrokerOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """Raised by services; `code` is stable and documented, `message` is for humans."""

    status = 400

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        if status is not None:
            self.status = status
        self.details = details
        self.headers = dict(headers or {})


class NotFound(ApiError):
    status = 404

    def __init__(self, message: str = "No such object in this project.", *, code: str = "not_found") -> None:
        super().__init__(code, message)


class Conflict(ApiError):
    status = 409


class Unprocessable(ApiError):
    status = 422


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details}}


# The database or Redis (broker, cache) out of reach for a moment — a restart, a failover: the request changed
# nothing it could not finish, so the client may simply try again.
OUTAGES = (
    DatabaseOperationalError,
    DatabaseInterfaceError,
    RedisConnectionError,
    RedisTimeoutError,
    BrokerOperationalError,
)
UNAVAILABLE = (503, "service_unavailable", "The service is briefly unavailable; try again in a moment.")


def unavailable_response(path: str) -> JsonResponse:
    logger.warning("database or redis out of reach on %s", path, exc_info=True)
    status, code, message = UNAVAILABLE
    response = JsonResponse(error_body(code, message), status=status)
    response["Retry-After"] = "1"
    return response


def _flatten_validation(detail: Any, path: str = "") -> list[dict[str, str]]:
    """DRF's nested error dict as a flat list of {"path", "message"} with JSON-path-like paths."""
    out: list[dict[str, str]] = []
    if isinstance(detail, dict):
        for key, value in detail.items():
            if key == "non_field_errors":
                out += _flatten_validation(value, path)
            else:
                out += _flatten_validation(value, f"{path}.{key}" if path else str(key))
    elif isinstance(detail, list):
        for index, value in enumerate(detail):
            if isinstance(value, (dict, list)):
                out += _flatten_validation(value, f"{path}[{index}]")
            else:
                out += _flatten_validation(value, path)
    else:
        out.append({"path": path or "$", "message": str(detail)})
    return out


_DRF_CODES: dict[type[drf.APIException], tuple[int, str]] = {
    drf.ParseError: (400, "invalid_json"),
    drf.NotAuthenticated: (401, "authentication_required"),
    drf.AuthenticationFailed: (401, "invalid_api_key"),
    drf.PermissionDenied: (403, "permission_denied"),
    drf.NotFound: (404, "not_found"),
    drf.MethodNotAllowed: (405, "method_not_allowed"),
    drf.NotAcceptable: (406, "not_acceptable"),
    drf.UnsupportedMediaType: (415, "unsupported_media_type"),
    drf.Throttled: (429, "rate_limited"),
}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every error an API view raises becomes the error JSON."""
    headers: dict[str, str] = {}
    if isinstance(exc, ApiError):
        status, code, message, details = exc.status, exc.code, exc.message, exc.details
        headers.update(exc.headers)
    elif isinstance(exc, drf.ValidationError):
        status, code, message = 422, "invalid_request", "The request is not valid."
        details = _flatten_validation(exc.detail)
        if details:
            first = details[0]
            message = f"{first['path']}: {first['message']}"
    elif isinstance(exc, RequestDataTooBig):
        status, code, message, details = 413, "request_too_large", "The request body is too large.", None
    elif isinstance(exc, (Http404, drf.NotFound)):
        status, code, message, details = 404, "not_found", "No such object in this project.", None
    elif isinstance(exc, (DjangoPermissionDenied,)):
        status, code, message, details = 403, "permission_denied", "Not allowed.", None
    elif isinstance(exc, drf.APIException):
        status, code = next(
            (sc for cls, sc in _DRF_CODES.items() if isinstance(exc, cls)),
            (exc.status_code, str(exc.default_code)),
        )
        detail = exc.detail
        custom_code = getattr(detail, "code", None)
        if isinstance(exc, (drf.AuthenticationFailed, drf.PermissionDenied)) and custom_code not in (
            None,
            exc.default_code,
        ):
            code = str(custom_code)
        message = str(detail) if not isinstance(detail, (dict, list)) else str(exc.default_detail)
        details = None
        if isinstance(exc, drf.NotAuthenticated):
            headers["WWW-Authenticate"] = 'Bearer realm="api"'
        wait = getattr(exc, "wait", None)  # drf.Throttled's, not in its stubs
        if isinstance(exc, drf.Throttled) and wait is not None:
            headers["Retry-After"] = str(int(wait))
    elif isinstance(exc, OUTAGES):
        logger.warning("database or redis out of reach in %s", context.get("view").__class__.__name__, exc_info=True)
        (status, code, message), details = UNAVAILABLE, None
        headers["Retry-After"] = "1"
    else:
        logger.exception("unhandled error in %s", context.get("view").__class__.__name__)
        status, code, message, details = 500, "internal_error", "Something went wrong on our side.", None
    return Response(error_body(code, str(message), details), status=status, headers=headers)


def is_api_path(path: str) -> bool:
    return path.startswith("/v1/") or path == "/v1" or path == "/healthz"


DRAIN_CHUNK = 64 * 1024


def drain_unread_body(request: HttpRequest) -> None:
    """Reads to its end, into nothing, a body the answer was decided without (a 401, a 403, a 429, a 404: never
    parsed, often never needed), when it is at most DATA_UPLOAD_MAX_MEMORY_SIZE: the client, which sends the whole
    body before it reads the answer, then reads the answer rather than a connection reset by a server that closed
    with the body still coming (gunicorn drains 64 KB of it, then closes). A larger body is left unread, as Django
    leaves it when it refuses one (413): reading stays bounded, whoever sends it."""
    if request._read_started:  # type: ignore[attr-defined]  # Django's, set by every read of the body
        return
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if length <= 0 or (limit is not None and length > limit):
        return
    try:
        while request.read(DRAIN_CHUNK):
            pass
    except UnreadablePostError:  # the client went away: nothing to answer
        pass


class ApiErrorMiddleware:
    """JSON errors for API paths that never reached a DRF view: unknown URLs, crashes in middleware. And the body of
    an API request that was answered without reading it is drained (`drain_unread_body`)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if is_api_path(request.path):
            drain_unread_body(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_api_path(request.path):
            return None
        if isinstance(exception, Http404):
            return JsonResponse(error_body("not_found", "No such endpoint."), status=404)
        if isinstance(exception, OUTAGES):
            return unavailable_response(request.path)
        logger.exception("unhandled error on %s", request.path)
        return JsonResponse(error_body("internal_error", "Something went wrong on our side."), status=500)


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request.path):
        return JsonResponse(error_body("not_found", "No such endpoint."), status=404)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception or Http404())


def handler500(request: HttpRequest) -> HttpResponse:
    if is_api_path(request.path):
        return JsonResponse(error_body("internal_error", "Something went wrong on our side."), status=500)
    from django.views.defaults import server_error

    return server_error(request)


@csrf_exempt
def api_not_found(request: HttpRequest) -> HttpResponse:
    return JsonResponse(error_body("not_found", "No such endpoint."), status=404)
