"""API key authentication: `Authorization: Bearer ka_sk_…` or `ka_pk_…` (SPEC §3).

The key is checked before anything reads the request's body (DRF parses it only when a view asks for
`request.data`, after `initial`): a request without a valid key costs its headers, a digest and one indexed lookup,
whatever it sends. Requests whose key is refused are counted per client address (kagent.throttle), 429 over the
limit."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from kagent import throttle
from kagent.clients import client_address
from kagent.cors import OriginRefused, origin_check
from kagent.models import ApiKey
from kagent.sql import api_key_by_digest

# linear: anchored, fixed length
KEY_RE = re.compile(r"^ka_(sk|pk)_[A-Za-z0-9_-]{43}(?!\n)$")
# last_used_at is advisory: write it at most once a minute per key, not on every request.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class KeyUser:
    """What `request.user` is for an API request: the key's project, never a dashboard user."""

    is_authenticated = True
    is_anonymous = False

    def __init__(self, api_key: ApiKey) -> None:
        self.api_key = api_key
        self.project = api_key.project


NOT_AUTHENTICATED = "An API key is required: 'Authorization: Bearer <API key>'."
PUBLISHABLE_REFUSED = (
    "A publishable key may only create and read sessions and runs (and read an agent's greeting); use a secret key "
    "on your server."
)


class KeyRefused(Exception):
    """The Authorization header names no usable key: 401 with `code`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def api_key_from_header(header: str) -> ApiKey | None:
    """The active key an `Authorization: Bearer …` header names (with its project); None without a header;
    KeyRefused for anything else. Every API request comes through here."""
    if not header:
        return None
    scheme, _, raw = header.partition(" ")
    raw = raw.strip()
    if scheme.lower() != "bearer" or not raw:
        raise KeyRefused("invalid_api_key", "Use the header 'Authorization: Bearer <API key>'.")
    if not KEY_RE.match(raw):
        raise KeyRefused("invalid_api_key", "That is not a K-Agent API key.")
    key = api_key_by_digest(ApiKey.digest_of(raw))
    if key is None:
        raise KeyRefused("invalid_api_key", "Unknown API key.")
    if key.revoked_at is not None:
        raise KeyRefused("api_key_revoked", "This API key has been revoked.")
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[KeyUser, ApiKey] | None:
        try:
            key = api_key_from_header(request.META.get("HTTP_AUTHORIZATION", ""))
        except KeyRefused as refused:
            throttle.authentication_failed(client_address(request._request))  # 429 over the address's limit
            raise exceptions.AuthenticationFailed(refused.message, code=refused.code) from None
        if key is None:
            return None
        try:
            origin_check(request._request, key)
        except OriginRefused as refused:
            raise exceptions.PermissionDenied(str(refused), code="origin_not_allowed") from None
        return KeyUser(key), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class SecretKeyRequired(BasePermission):
    """The default: a secret key. Views that publishable keys may use set `publishable_allowed = True`."""

    def has_permission(self, request: Request, view: Any) -> bool:
        key = request.auth
        if not isinstance(key, ApiKey):
            raise exceptions.NotAuthenticated(NOT_AUTHENTICATED)
        if key.is_secret or getattr(view, "publishable_allowed", False):
            return True
        raise exceptions.PermissionDenied(PUBLISHABLE_REFUSED, code="publishable_key_not_allowed")
