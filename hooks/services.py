"""Writes for webhook endpoints: create, change, delete, rotate the secret, and the secrets that sign now.

Dispatching an event into its deliveries, an attempt, a test event and manual redelivery are in `hooks/deliveries.py`;
the sweep and retention in `hooks/sweep.py`.
"""

from __future__ import annotations

import base64
import secrets as random_bytes
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from hooks.models import EVENT_TYPES, WebhookEndpoint
from kagent import crypto
from kagent.egress import EgressError, destination_check
from kagent.errors import Conflict, Unprocessable
from kagent.inputs import UNSET, is_set
from kagent.models import Project
from tools.validation import split_url

MAX_ENDPOINTS = 20
ROTATION_OVERLAP = timedelta(hours=24)


# --- endpoints ----------------------------------------------------------------------------------------------------


def _new_secret() -> str:
    return "whsec_" + base64.b64encode(random_bytes.token_bytes(32)).decode()


def _check_event_types(event_types: list[str]) -> list[str]:
    unknown = [name for name in event_types if name not in EVENT_TYPES]
    if unknown:
        message = f"Unknown event type {unknown[0][:60]}; the types are {', '.join(EVENT_TYPES)}."
        raise Unprocessable("invalid_event_types", message, details=[{"path": "$.event_types", "message": message}])
    if not event_types:
        message = "Subscribe to at least one event type."
        raise Unprocessable("invalid_event_types", message, details=[{"path": "$.event_types", "message": message}])
    return [name for name in EVENT_TYPES if name in event_types]  # the product's order, each once


def endpoint_url_check(url: str) -> str:
    """A webhook endpoint's URL: sent to as written (no placeholders), `https://` to port 443 or 8443 with a host name
    and no user information (an HTTP tool's rules for the literal part of its URL), and nothing the outbound client
    would refuse at delivery without looking it up (one of K-Agent's own hosts, an address literal in a denied
    range): refused at save, not at the first delivery."""

    def refused(message: str) -> Unprocessable:
        return Unprocessable("invalid_url", message, details=[{"path": "$.url", "message": message}])

    if "{{" in url or "}}" in url:
        raise refused("A webhook endpoint's URL is sent to as written: it can't hold placeholders.")
    if not url.startswith("https://"):
        raise refused("A webhook endpoint's URL starts with https:// (https://host[:port]/path).")
    try:
        split_url(url)  # an HTTP tool's rules for a URL's literal part: a lower-case host name, the allowed ports…
        destination_check(url)
    except Unprocessable as exc:
        raise refused(exc.message) from None
    except EgressError as exc:
        raise refused(f"K-Agent won't send to this URL: {exc.message}.") from None
    return url


def endpoint_create(
    *, project: Project, url: str, event_types: list[str], description: str = "", enabled: bool = True
) -> tuple[WebhookEndpoint, str]:
    """A new endpoint and its secret (shown this once)."""
    checked_url = endpoint_url_check(url)
    types = _check_event_types(event_types)
    with transaction.atomic():
        Project.objects.select_for_update().get(pk=project.pk)  # the count below holds under concurrent creates
        if WebhookEndpoint.objects.filter(project=project).count() >= MAX_ENDPOINTS:
            raise Conflict("too_many_endpoints", f"A project has at most {MAX_ENDPOINTS} webhook endpoints.")
        endpoint = WebhookEndpoint(
            project=project, url=checked_url, event_types=types, description=description.strip(), enabled=enabled
        )
        secret = _new_secret()
        endpoint.secret_ciphertext = crypto.encrypt(secret, binding=endpoint.binding())
        endpoint.save(force_insert=True)
    return endpoint, secret


def endpoint_update(
    *,
    endpoint: WebhookEndpoint,
    url: str = UNSET,
    event_types: list[str] = UNSET,
    description: str = UNSET,
    enabled: bool = UNSET,
) -> WebhookEndpoint:
    """Change what an endpoint receives, or switch it off and on. Enabling it again clears why it was disabled
    (what failed meanwhile can be redelivered)."""
    changes: dict[str, Any] = {}
    if is_set(url) and url != endpoint.url:
        changes["url"] = endpoint_url_check(url)
    if is_set(event_types):
        changes["event_types"] = _check_event_types(event_types)
    if is_set(description):
        changes["description"] = (description or "").strip()
    if is_set(enabled) and enabled != endpoint.enabled:
        changes["enabled"] = enabled
        if enabled:
            changes.update(disabled_reason="", disabled_at=None, failing_since=None)
        else:
            changes.update(disabled_reason="Disabled by the project.", disabled_at=timezone.now())
    if changes:
        changes["updated_at"] = timezone.now()
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(**changes)
        for key, value in changes.items():
            setattr(endpoint, key, value)
    return endpoint


# A dispatch that made a delivery for the endpoint after the deletion read its deliveries holds the endpoint's row
# (FOR KEY SHARE: the delivery's key is checked in its INSERT, runs/migrations/0010) until it commits; the deletion
# waits for it, then finds a delivery it didn't delete. Read again, it deletes that one too.
DELETE_TRIES = 3


def endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """The endpoint, its deliveries and their log. A delivery being sent right now finishes without a trace."""
    for attempt in range(DELETE_TRIES):
        try:
            with transaction.atomic():
                WebhookEndpoint.objects.filter(pk=endpoint.pk).delete()
            return
        except IntegrityError:
            if attempt == DELETE_TRIES - 1:
                raise


def endpoint_rotate_secret(*, endpoint: WebhookEndpoint) -> tuple[WebhookEndpoint, str]:
    """A new secret (shown this once); the previous one keeps signing beside it for 24 hours."""
    now = timezone.now()
    secret = _new_secret()
    with transaction.atomic():
        current = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        previous = crypto.decrypt(bytes(current.secret_ciphertext), binding=current.binding())
        current.previous_secret_ciphertext = crypto.encrypt(previous, binding=current.binding("previous"))
        current.previous_secret_expires_at = now + ROTATION_OVERLAP
        current.secret_ciphertext = crypto.encrypt(secret, binding=current.binding())
        current.updated_at = now
        current.save(
            update_fields=[
                "previous_secret_ciphertext",
                "previous_secret_expires_at",
                "secret_ciphertext",
                "updated_at",
            ]
        )
    return current, secret


def endpoint_secrets(endpoint: WebhookEndpoint, now: datetime) -> list[str]:
    """The secrets that sign now, newest first: two during a rotation's 24 hours."""
    found = [crypto.decrypt(bytes(endpoint.secret_ciphertext), binding=endpoint.binding())]
    expires = endpoint.previous_secret_expires_at
    if endpoint.previous_secret_ciphertext and expires is not None and expires > now:
        found.append(crypto.decrypt(bytes(endpoint.previous_secret_ciphertext), binding=endpoint.binding("previous")))
    return found
