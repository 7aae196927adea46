"""API key authentication: `Authorization: Bearer ka_sk_…` or `ka_pk_…` (SPEC §3)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from kagent.models import ApiKey

# linear: anchored, fixed length
KEY_RE = re.compile(r"^ka_(sk|pk)_[A-Za-z0-9_-]{43}$")
# last_used_at is advisory: write it at most once a minute per key, not on every request.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class KeyUser:
    """What `request.user` is for an API request: the key's project, never a dashboard user."""

    is_authenticated = True
    is_anonymous = False

    def __init__(self, api_key: ApiKey) -> None:
        self.api_key = api_key
        self.project = api_key.project


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[KeyUser, ApiKey] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        raw = raw.strip()
        if scheme.lower() != "bearer" or not raw:
            raise exceptions.AuthenticationFailed(
                "Use the header 'Authorization: Bearer <API key>'.", code="invalid_api_key"
            )
        if not KEY_RE.match(raw):
            raise exceptions.AuthenticationFailed("That is not a K-Agent API key.", code="invalid_api_key")
        try:
            key = ApiKey.objects.select_related("project").get(digest=ApiKey.digest_of(raw))
        except ApiKey.DoesNotExist:
            raise exceptions.AuthenticationFailed("Unknown API key.", code="invalid_api_key") from None
        if key.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This API key has been revoked.", code="api_key_revoked")
        now = timezone.now()
        if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
            key.last_used_at = now
        return KeyUser(key), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class SecretKeyRequired(BasePermission):
    """The default: a secret key. Views that publishable keys may use set `publishable_allowed = True`."""

    def has_permission(self, request: Request, view: Any) -> bool:
        key = request.auth
        if not isinstance(key, ApiKey):
            raise exceptions.NotAuthenticated("An API key is required: 'Authorization: Bearer <API key>'.")
        if key.is_secret or getattr(view, "publishable_allowed", False):
            return True
        raise exceptions.PermissionDenied(
            "A publishable key may only create and read sessions and runs; use a secret key on your server.",
            code="publishable_key_not_allowed",
        )
