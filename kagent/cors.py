"""Browsers calling `/v1` with a publishable key from a business's own pages (the chat widget): CORS.

Each publishable key lists the exact origins (`https://shop.example`) whose pages may use it (`allowed_origins`).

- A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) carries no `Authorization` header, so it
  can't be checked against a key: it is answered for an origin that is listed on at least one active publishable
  key (of any project) and refused (403 `origin_not_allowed`, no CORS headers) otherwise. Passing a preflight
  grants nothing by itself.
- The actual request is checked against its own key: a publishable key with an `Origin` header that isn't on that
  key's list is 403 `origin_not_allowed` before anything else happens; one that is gets
  `Access-Control-Allow-Origin` (the exact origin, never `*`) on its response, errors and event streams included.
- Secret keys never get CORS headers: a browser page can't read a response made with one.
- No `Origin` header (servers, mobile apps): nothing to check, nothing added.
- No cookies are involved (`Access-Control-Allow-Credentials` is never sent): the key is the credential.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.utils.cache import patch_vary_headers

from kagent.errors import ApiError, error_body, is_api_path
from kagent.models import ApiKey

MAX_ORIGINS = 20
MAX_ORIGIN_LENGTH = 255
ALLOW_METHODS = "GET, POST, OPTIONS"
ALLOW_HEADERS = "Authorization, Content-Type, Last-Event-ID, X-End-User-Token"
EXPOSE_HEADERS = "Retry-After"
MAX_AGE_S = 600
LISTED_CACHE_S = 60
# Where authentication leaves the origin it allowed, for the middleware to answer with (a META key: no attribute).
ALLOWED = "kagent.cors_allowed_origin"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")

REFUSED_MESSAGE = (
    "This publishable key may not be used from this website. Add the page's origin to the key's allowed origins "
    "(dashboard: Settings › API keys)."
)


class OriginRefused(Exception):
    """A publishable key used from a page whose origin isn't on its list: 403 `origin_not_allowed`."""


# --- what an origin is -------------------------------------------------------------------------------------------


def _host(raw: str) -> str:
    """A host name (ASCII labels), an IPv4 address or a bracketed IPv6 address, lowercased and normalized."""
    if raw.startswith("[") and raw.endswith("]"):
        try:
            return f"[{ipaddress.IPv6Address(raw[1:-1]).compressed}]"
        except ValueError:
            raise ValueError("that is not an IPv6 address") from None
    host = raw.lower()
    if not host or len(host) > 253:
        raise ValueError("the host name is missing or too long")
    labels = host.split(".")
    if all(label.isdigit() for label in labels):
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise ValueError("that is not an IPv4 address") from None
    for label in labels:
        if not 1 <= len(label) <= 63 or not set(label) <= _LABEL_CHARS or label[0] == "-" or label[-1] == "-":
            raise ValueError("the host name has letters, digits, hyphens and dots only, like shop.example")
    return host


def origin_parse(raw: str) -> str:
    """The origin as a browser sends it (`scheme://host[:port]`, the default port left out), or ValueError with
    what is wrong, in words a business can act on."""
    value = raw.strip()
    example = "an origin is a scheme and a host, like https://shop.example (or http://localhost:3000)"
    if not value:
        raise ValueError(example)
    if len(value) > MAX_ORIGIN_LENGTH:
        raise ValueError(f"an origin is at most {MAX_ORIGIN_LENGTH} characters")
    if not value.isascii():
        raise ValueError("write an international host name in its ASCII form (xn--…), as browsers send it")
    if any(char.isspace() or ord(char) < 32 or char in "\\\"'<>`^{}|" for char in value):
        raise ValueError(example)
    if "*" in value:
        raise ValueError("wildcards are not allowed: list each origin")
    scheme, separator, rest = value.partition("://")
    scheme = scheme.lower()
    if not separator:
        raise ValueError(example)
    if scheme not in _DEFAULT_PORTS:
        raise ValueError("an origin starts with https:// (or http://)")
    if "@" in rest:
        raise ValueError("an origin has no user name or password")
    if any(char in rest for char in "/?#"):
        raise ValueError(f"an origin has no path, query or fragment: {scheme}://{rest.split('/')[0].split('?')[0]}")
    if rest.startswith("["):
        end = rest.find("]")
        if end < 0:
            raise ValueError("that is not an IPv6 address")
        host_part, port_part = rest[: end + 1], rest[end + 1 :]
        if port_part and not port_part.startswith(":"):
            raise ValueError(example)
        port_text = port_part[1:] if port_part else None
    else:
        host_part, colon, port_text_raw = rest.partition(":")
        port_text = port_text_raw if colon else None
    host = _host(host_part)
    port = ""
    if port_text is not None:
        if not (port_text.isdigit() and 1 <= len(port_text) <= 5) or not 0 < int(port_text) < 65536:
            raise ValueError("the port is a number from 1 to 65535")
        if int(port_text) != _DEFAULT_PORTS[scheme]:
            port = f":{int(port_text)}"
    return f"{scheme}://{host}{port}"


def allowed_origins_parse(values: Any) -> list[str]:
    """A key's list, each origin normalized, duplicates dropped; ApiError 422 `invalid_allowed_origins` naming the
    first wrong entry (`$.allowed_origins[i]`)."""

    def problem(message: str, path: str = "$.allowed_origins") -> ApiError:
        return ApiError("invalid_allowed_origins", message, status=422, details=[{"path": path, "message": message}])

    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise problem("allowed_origins is a list of origins like https://shop.example.")
    if len(values) > MAX_ORIGINS:
        raise problem(f"A key allows at most {MAX_ORIGINS} origins.")
    origins: list[str] = []
    for index, value in enumerate(values):
        try:
            origin = origin_parse(value)
        except ValueError as exc:
            shown = value.strip()[:80]
            raise problem(f"{shown or 'An empty line'}: {exc}.", f"$.allowed_origins[{index}]") from None
        if origin not in origins:
            origins.append(origin)
    return origins


# --- the checks --------------------------------------------------------------------------------------------------


def _listed_key(origin: str) -> str:
    return "kagent:cors:listed:" + hashlib.sha256(origin.encode()).hexdigest()


def origin_listed(origin: str) -> bool:
    """Whether any active publishable key lists `origin` (what a preflight is answered by); cached a minute,
    forgotten when a key's list changes (`forget_listed`)."""
    try:
        normalized = origin_parse(origin)
    except ValueError:
        return False
    if normalized != origin:  # browsers send the serialized form; anything else is not a browser's origin
        return False
    cached = cache.get(_listed_key(origin))
    if cached is not None:
        return bool(cached)
    keys = ApiKey.objects.filter(kind=ApiKey.Kind.PUBLISHABLE, revoked_at__isnull=True)
    listed = keys.filter(allowed_origins__contains=[origin]).exists()
    cache.set(_listed_key(origin), listed, LISTED_CACHE_S)
    return listed


def forget_listed(origins: list[str]) -> None:
    cache.delete_many([_listed_key(origin) for origin in origins])


def origin_check(request: HttpRequest, key: ApiKey) -> None:
    """Called once the request's key is known: a publishable key from a page whose origin it doesn't list is
    refused; one it lists gets the CORS headers on its response (the middleware adds them)."""
    origin = request.META.get("HTTP_ORIGIN")
    if not origin or key.is_secret:
        return
    if origin not in (key.allowed_origins or []):
        raise OriginRefused(REFUSED_MESSAGE)
    request.META[ALLOWED] = origin


# --- the middleware ----------------------------------------------------------------------------------------------


def _refused() -> JsonResponse:
    response = JsonResponse(error_body("origin_not_allowed", REFUSED_MESSAGE), status=403)
    patch_vary_headers(response, ("Origin",))
    return response


def _preflight(origin: str) -> HttpResponse:
    response = HttpResponse(status=204)
    response["Access-Control-Allow-Origin"] = origin
    response["Access-Control-Allow-Methods"] = ALLOW_METHODS
    response["Access-Control-Allow-Headers"] = ALLOW_HEADERS
    response["Access-Control-Max-Age"] = str(MAX_AGE_S)
    patch_vary_headers(response, ("Origin",))
    return response


def _is_preflight(request: HttpRequest) -> bool:
    return (
        request.method == "OPTIONS"
        and bool(request.META.get("HTTP_ORIGIN"))
        and "HTTP_ACCESS_CONTROL_REQUEST_METHOD" in request.META
    )


def _finish(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    patch_vary_headers(response, ("Origin",))
    allowed = request.META.get(ALLOWED)
    if allowed:
        response["Access-Control-Allow-Origin"] = allowed
        response["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
    return response


class CorsMiddleware:
    """Answers preflights under `/v1` and puts the CORS headers the request's authentication allowed on its
    response. Sync and async (the ASGI server streams run events through it)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        if not is_api_path(request.path):
            return self.get_response(request)
        if _is_preflight(request):
            origin = request.META["HTTP_ORIGIN"]
            return _preflight(origin) if origin_listed(origin) else _refused()
        return _finish(request, self.get_response(request))

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]] = self.get_response
        if not is_api_path(request.path):
            return await get_response(request)
        if _is_preflight(request):
            origin = request.META["HTTP_ORIGIN"]
            listed = await sync_to_async(origin_listed, thread_sensitive=True)(origin)
            return _preflight(origin) if listed else _refused()
        return _finish(request, await get_response(request))
