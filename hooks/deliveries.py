"""Webhook deliveries: dispatching an event into its deliveries, one attempt of a delivery, a test event sent to an
endpoint now, and manual redelivery.

Delivery (issue #11): a delivery is taken by one worker at a time with a conditional UPDATE that sets its lease
(`leased_until`); the attempt goes through the hardened outbound client only (`kagent.egress`, purpose `webhook`),
signed with Standard Webhooks (`kagent.signing`) with `webhook-id` = the event's id on every attempt and every
redelivery, so the business deduplicates. Network errors, timeouts, 408, 429 and 5xx are retried after
`KAGENT_WEBHOOK_RETRY_SECONDS` (each ±20%, about a day in all); any other answer that isn't 2xx stops the retries.
Each attempt is logged (status, duration, a masked and bounded excerpt of the answer, an error code). A delivery that
used up its retries with no success on its endpoint since it was made disables the endpoint, saying why on it and in
the log. A worker killed mid-attempt leaves its lease to run out; the sweep then queues the delivery again.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from hooks import outbox
from hooks.models import PING, WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent
from hooks.resources import check_event_body
from hooks.services import endpoint_secrets
from kagent import broker
from kagent.egress import USER_AGENT, EgressClient, EgressError, get_client, shown_code
from kagent.errors import Conflict, NotFound
from kagent.masking import mask_secrets
from kagent.rendering import Resource, unix
from kagent.signing import SigningError, webhook_headers

DELIVER_TASK = "hooks.deliver"
PURPOSE = "webhook"
TIMEOUT_MS = 10_000
JITTER = 0.2
EXCERPT_CHARS = 500
# Retries further away than this wait for the sweep rather than in a worker's memory (a countdown task).
COUNTDOWN_MAX_SECONDS = 300.0

# Codes of the delivery log for a call that didn't get an answer (the egress code where it says nothing internal).
_LOGGED_EGRESS_CODES = frozenset(
    {
        "timeout",
        "connect_failed",
        "tls_failed",
        "dns_failed",
        "address_not_allowed",
        "url_not_allowed",
        "redirect_not_followed",
        "response_too_large",
    }
)
# Failures an automatic retry can't change: the URL itself is refused, or the server redirects elsewhere.
_FINAL_EGRESS_CODES = frozenset({"url_not_allowed", "redirect_not_followed", "invalid_request", "header_not_allowed"})


# --- dispatch: an event into its deliveries ---------------------------------------------------------------------


def event_dispatch(*, event_id: str) -> list[str]:
    """Renders the event's data if it has none yet and makes one delivery per enabled endpoint that wants its type,
    once (whoever dispatches first). The new deliveries' ids."""
    now = timezone.now()
    with transaction.atomic():
        event = (
            WebhookEvent.objects.select_for_update(skip_locked=True)
            .filter(pk=event_id, dispatched_at__isnull=True)
            .first()
        )
        if event is None:
            return []
        if event.data is None:
            renderer = outbox.renderer_for(event.type)
            event.data = renderer(event) if renderer is not None else None
        made: list[WebhookDelivery] = []
        if event.data is not None:  # None: the object is gone (its project deleted), nothing to send
            endpoints = WebhookEndpoint.objects.filter(project_id=event.project_id, enabled=True)
            made = [
                WebhookDelivery(
                    project_id=event.project_id, endpoint=endpoint, event=event, next_attempt_at=now, created_at=now
                )
                for endpoint in endpoints
                if event.type in endpoint.event_types
            ]
            WebhookDelivery.objects.bulk_create(made, ignore_conflicts=True)
        WebhookEvent.objects.filter(pk=event.pk).update(data=event.data, dispatched_at=now)
    return [delivery.pk for delivery in made]


def send_delivery(delivery_id: str, countdown: float | None = None) -> None:
    """Queues the delivery's attempt (kagent.broker.enqueue: after commit; one lost is the sweep's)."""
    broker.enqueue(DELIVER_TASK, delivery_id, countdown=countdown)


# --- one attempt ------------------------------------------------------------------------------------------------


def event_body(event: WebhookEvent) -> bytes:
    """What the endpoint receives: the same bytes on every attempt and redelivery."""
    payload = {"id": event.pk, "type": event.type, "created_at": unix(event.created_at), "data": event.data}
    if Resource.check_renders:
        check_event_body(payload)
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


@dataclass(frozen=True)
class AttemptResult:
    """How an attempt went: `outcome` succeeded, retrying or failed; `next_attempt_at` when retrying."""

    outcome: str
    next_attempt_at: datetime | None = None

    @property
    def countdown(self) -> float | None:
        """Seconds until the retry, when a worker should wait for it (else the sweep queues it when due)."""
        if self.next_attempt_at is None:
            return None
        seconds = max(0.0, (self.next_attempt_at - timezone.now()).total_seconds())
        return seconds if seconds <= COUNTDOWN_MAX_SECONDS else None


@dataclass(frozen=True)
class _Answer:
    ok: bool
    retry: bool
    status_code: int | None
    error_code: str
    excerpt: str


def _excerpt(body: bytes, secrets: list[str]) -> str:
    """The start of an answer for the log: the endpoint's secrets masked (also without their `whsec_`), whole body
    first, then cut; no control characters."""
    values = [*secrets, *(secret.removeprefix("whsec_") for secret in secrets)]
    text = mask_secrets(body.decode("utf-8", "replace"), values, replacement="****")
    return "".join(ch if ch.isprintable() else " " for ch in text)[:EXCERPT_CHARS]


def _send(endpoint: WebhookEndpoint, event: WebhookEvent, client: EgressClient, now: datetime) -> _Answer:
    secrets = endpoint_secrets(endpoint, now)
    body = event_body(event)
    try:
        signature = webhook_headers(secrets=secrets, message_id=event.pk, timestamp=int(time.time()), body=body)
    except SigningError as exc:  # never send an unsigned call
        return _Answer(False, True, None, exc.code[:40], "")
    headers = {**signature, "Content-Type": "application/json", "User-Agent": USER_AGENT}
    try:
        response = client.request(
            project_id=endpoint.project_id,
            purpose=PURPOSE,
            method="POST",
            url=endpoint.url,
            headers=headers,
            body=body,
            timeout_ms=TIMEOUT_MS,
            secret_values=secrets,
        )
    except EgressError as exc:
        if exc.status is not None and 200 <= exc.status < 300:  # answered 2xx; only its body was unreadable
            return _Answer(True, False, exc.status, "", "")
        code = shown_code(exc.code) if exc.code in _LOGGED_EGRESS_CODES else "upstream_failed"
        return _Answer(False, exc.code not in _FINAL_EGRESS_CODES, exc.status, code, "")
    status = response.status
    excerpt = _excerpt(response.body, secrets)
    if 200 <= status < 300:
        return _Answer(True, False, status, "", excerpt)
    retry = status in (408, 429) or status >= 500
    return _Answer(False, retry, status, "http_status", excerpt)


def delivery_attempt(*, delivery_id: str, client: EgressClient | None = None) -> AttemptResult | None:
    """One attempt of a pending, due delivery that nobody holds (None: nothing to do, someone else has it)."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.KAGENT_WEBHOOK_LEASE_SECONDS)
    free = Q(leased_until__isnull=True) | Q(leased_until__lt=now)
    taken = (
        WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now)
        .filter(free)
        .update(leased_until=lease)
    )
    if not taken:
        return None
    delivery = WebhookDelivery.objects.select_related("endpoint", "event").get(pk=delivery_id)
    endpoint, event = delivery.endpoint, delivery.event
    if not endpoint.enabled:
        WebhookDelivery.objects.filter(pk=delivery.pk, leased_until=lease).update(
            status=WebhookDelivery.Status.FAILED,
            last_error_code="endpoint_disabled",
            leased_until=None,
            next_attempt_at=None,
            completed_at=now,
        )
        return AttemptResult(WebhookAttempt.Outcome.FAILED)
    started = time.monotonic()
    answer = _send(endpoint, event, client or get_client(), now)
    duration_ms = int((time.monotonic() - started) * 1000)
    return _record(delivery, answer, lease=lease, started_at=now, duration_ms=duration_ms)


def _record(
    delivery: WebhookDelivery, answer: _Answer, *, lease: datetime, started_at: datetime, duration_ms: int
) -> AttemptResult | None:
    """The attempt in the log and what follows from it, together; only while this worker still holds the delivery."""
    now = timezone.now()
    schedule = settings.KAGENT_WEBHOOK_RETRY_SECONDS
    exhausted = False
    if answer.ok:
        result = AttemptResult(WebhookAttempt.Outcome.SUCCEEDED)
    elif answer.retry and not delivery.manual and delivery.retries < len(schedule):
        delay = schedule[delivery.retries] * random.uniform(1 - JITTER, 1 + JITTER)  # noqa: S311 - jitter, not a key
        result = AttemptResult(WebhookAttempt.Outcome.RETRYING, now + timedelta(seconds=delay))
    else:
        exhausted = answer.retry and not delivery.manual
        result = AttemptResult(WebhookAttempt.Outcome.FAILED)
    final = result.outcome != WebhookAttempt.Outcome.RETRYING
    with transaction.atomic():
        fields: dict[str, Any] = {
            "attempts": delivery.attempts + 1,
            "last_attempt_at": started_at,
            "last_status_code": answer.status_code,
            "last_error_code": answer.error_code,
            "leased_until": None,
            "manual": False,
            "next_attempt_at": result.next_attempt_at,
        }
        if result.outcome == WebhookAttempt.Outcome.RETRYING:
            fields["retries"] = delivery.retries + 1
        if final:
            fields["status"] = WebhookDelivery.Status.SUCCEEDED if answer.ok else WebhookDelivery.Status.FAILED
            fields["completed_at"] = now
        if not WebhookDelivery.objects.filter(pk=delivery.pk, leased_until=lease).update(**fields):
            return None  # deleted meanwhile, or held too long and taken by another worker: its attempt counts
        attempt = WebhookAttempt.objects.create(
            delivery_id=delivery.pk,
            number=delivery.attempts + 1,
            manual=delivery.manual,
            started_at=started_at,
            duration_ms=duration_ms,
            status_code=answer.status_code,
            error_code=answer.error_code,
            response_excerpt=answer.excerpt,
            outcome=result.outcome,
        )
        endpoints = WebhookEndpoint.objects.filter(pk=delivery.endpoint_id)
        if delivery.event.type == PING:
            return result  # a test event tells the person; it says nothing of the endpoint's health
        if answer.ok:
            endpoints.update(last_success_at=now, failing_since=None)
        else:
            endpoints.update(failing_since=Coalesce("failing_since", started_at))
            if exhausted:
                reason = _disable_if_failing(delivery, answer, now)
                if reason:
                    WebhookAttempt.objects.filter(pk=attempt.pk).update(note=reason)
    return result


def _disable_if_failing(delivery: WebhookDelivery, answer: _Answer, now: datetime) -> str:
    """Persistent failure: this delivery used up a day of retries and nothing reached the endpoint since it was
    made. The endpoint is disabled, with the reason on it and in the log; its pending deliveries stop. The reason
    ("" when the endpoint stays as it is)."""
    endpoint = WebhookEndpoint.objects.select_for_update().get(pk=delivery.endpoint_id)
    if not endpoint.enabled or (
        endpoint.last_success_at is not None and endpoint.last_success_at >= delivery.created_at
    ):
        return ""
    last = f"HTTP {answer.status_code}" if answer.status_code else answer.error_code or "no answer"
    reason = (
        f"Disabled automatically on {now:%Y-%m-%d %H:%M} UTC: every attempt to deliver {delivery.event_id} failed "
        f"for about a day ({delivery.attempts + 1} attempts; the last: {last}). Fix the endpoint, enable it, and "
        "redeliver what failed."
    )
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        enabled=False, disabled_reason=reason[:500], disabled_at=now, updated_at=now
    )
    WebhookDelivery.objects.filter(endpoint_id=endpoint.pk, status=WebhookDelivery.Status.PENDING).exclude(
        pk=delivery.pk
    ).filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now)).update(
        status=WebhookDelivery.Status.FAILED,
        last_error_code="endpoint_disabled",
        next_attempt_at=None,
        completed_at=now,
    )
    return reason[:500]


# --- a test event ------------------------------------------------------------------------------------------------


def endpoint_send_test(*, endpoint: WebhookEndpoint, client: EgressClient | None = None) -> WebhookDelivery:
    """A signed `ping` event sent to the endpoint now, once: in its delivery log like any delivery, never retried,
    and not counted for or against the endpoint's health (it can't disable it, nor mark it recovered)."""
    if not endpoint.enabled:
        raise Conflict("endpoint_disabled", "This endpoint is disabled: enable it first, then send a test event.")
    now = timezone.now()
    event = WebhookEvent.objects.create(
        project_id=endpoint.project_id,
        type=PING,
        object_id=endpoint.pk,
        data={"endpoint": endpoint.pk, "message": "A test event from K-Agent: your endpoint is reachable and signed."},
    )
    delivery = WebhookDelivery.objects.create(
        project_id=endpoint.project_id, endpoint=endpoint, event=event, manual=True, next_attempt_at=now
    )
    delivery_attempt(delivery_id=delivery.pk, client=client)
    delivery.refresh_from_db()
    return delivery


# --- manual redelivery ------------------------------------------------------------------------------------------


def delivery_redeliver(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """Sends the event to the endpoint again now, with the same `webhook-id`: one attempt, logged like the others. A
    delivery still retrying keeps its schedule (its attempt is only brought forward): a failed manual attempt must
    not end the automatic retries it had left."""
    now = timezone.now()
    with transaction.atomic():
        locked = WebhookDelivery.objects.select_for_update().select_related("endpoint", "event")
        current = locked.filter(pk=delivery.pk).first()
        if current is None:  # deleted since it was read: with its endpoint, or with its event by retention
            raise NotFound("No delivery with that id for this endpoint.")
        if not current.endpoint.enabled:
            raise Conflict("endpoint_disabled", "This endpoint is disabled: enable it first, then redeliver.")
        if current.leased_until is not None and current.leased_until > now:
            raise Conflict("delivery_in_progress", "This delivery is being sent right now; look again in a moment.")
        retrying = current.status == WebhookDelivery.Status.PENDING
        WebhookDelivery.objects.filter(pk=current.pk).update(
            status=WebhookDelivery.Status.PENDING, manual=not retrying, next_attempt_at=now, completed_at=None
        )
        send_delivery(current.pk)
    current.refresh_from_db()
    return current
