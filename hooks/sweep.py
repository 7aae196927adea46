"""The webhooks' safety net and retention: the sweep that loses nothing when a worker dies (events whose dispatch
was lost, deliveries whose message was lost or whose worker died holding them), and the expiry of events done with.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from hooks import outbox
from hooks.deliveries import send_delivery
from hooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent
from kagent.selectors import project_ids_rotated
from kagent.services import EXPIRE_BUDGET_S

# An event not dispatched this long after it was recorded (its dispatch message was lost): dispatched by the sweep.
DISPATCH_GRACE = timedelta(seconds=5)
# A due delivery nobody holds, this long after it was due (its message was lost): queued again by the sweep.
RESEND_GRACE = timedelta(seconds=30)


# --- the sweep --------------------------------------------------------------------------------------------------


def hooks_sweep(*, dispatch: Any = outbox.dispatch, deliver: Any = send_delivery, limit: int = 500) -> dict[str, int]:
    """The safety net (beat, every KAGENT_SWEEP_SECONDS): events whose dispatch was lost are dispatched, deliveries
    due whose message was lost, or whose worker died holding them (the lease ran out), are queued again."""
    now = timezone.now()
    events = list(
        WebhookEvent.objects.filter(dispatched_at__isnull=True, created_at__lt=now - DISPATCH_GRACE)
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )
    for event_id in events:
        dispatch(event_id)
    lost = Q(leased_until__lt=now) | Q(leased_until__isnull=True, next_attempt_at__lt=now - RESEND_GRACE)
    due = list(
        WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now)
        .filter(lost)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )
    for delivery_id in due:
        deliver(delivery_id)
    return {"dispatched": len(events), "queued": len(due)}


def webhook_events_expire(
    *, before: datetime, batch: int = 500, limit: int | None = None, budget_s: float = EXPIRE_BUDGET_S
) -> int:
    """Deletes the events created before `before` that are done (dispatched, no delivery pending), with their
    deliveries and attempt logs: `batch` per transaction, each project's oldest first (its (project, created_at)
    index), the projects from a random one on, until none is left, `limit` are deleted or `budget_s` has passed. A
    delivery made pending again meanwhile (a redelivery) keeps its event: the deliveries are locked before the check
    that none is pending."""
    pending = WebhookDelivery.objects.filter(event=OuterRef("pk"), status=WebhookDelivery.Status.PENDING)
    deadline = time.monotonic() + budget_s
    limit = limit if limit is not None else sys.maxsize
    deleted = 0
    for project_id in project_ids_rotated():
        while deleted < limit and time.monotonic() < deadline:
            done = (
                WebhookEvent.objects.filter(project_id=project_id, created_at__lt=before, dispatched_at__isnull=False)
                .exclude(Exists(pending))
                .order_by("created_at")
            )
            candidates = list(done.values_list("pk", flat=True)[: min(batch, limit - deleted)])
            if not candidates:
                break
            with transaction.atomic():
                # The attempts' rows before the deliveries', in the order endpoint_delete deletes them: neither holds
                # one while waiting for the other (a deadlock, which PostgreSQL breaks by failing one of them).
                attempts = WebhookAttempt.objects.select_for_update(of=("self",))
                list(attempts.filter(delivery__event_id__in=candidates).values_list("pk"))
                list(WebhookDelivery.objects.select_for_update().filter(event_id__in=candidates).values_list("pk"))
                ids = list(done.filter(pk__in=candidates).values_list("pk", flat=True))
                WebhookAttempt.objects.filter(delivery__event_id__in=ids).delete()
                WebhookDelivery.objects.filter(event_id__in=ids).delete()
                WebhookEvent.objects.filter(pk__in=ids).delete()
            deleted += len(ids)
            if len(candidates) < batch:
                break
        if deleted >= limit or time.monotonic() >= deadline:
            break
    return deleted
