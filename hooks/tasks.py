"""Celery tasks: interfaces like API views. They take ids and call a service."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from hooks import deliveries
from hooks.sweep import hooks_sweep, webhook_events_expire


@shared_task(name="hooks.dispatch", max_retries=0, time_limit=60, ignore_result=True)
def dispatch(event_id: str) -> None:
    # Once per event (the dispatch is conditional); its deliveries are queued after it commits.
    for delivery_id in deliveries.event_dispatch(event_id=event_id):
        deliveries.send_delivery(delivery_id)


@shared_task(
    name="hooks.deliver",
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=0,
    time_limit=120,
    soft_time_limit=90,
    ignore_result=True,
)
def deliver(delivery_id: str) -> None:
    # Take the delivery first (its lease), then send: a duplicate message finds it held or done and does nothing. A
    # retry due soon is queued with a countdown; later ones, and anything a dead worker held, come from the sweep.
    result = deliveries.delivery_attempt(delivery_id=delivery_id)
    if result is not None and result.countdown is not None:
        deliveries.send_delivery(delivery_id, countdown=result.countdown)


@shared_task(name="hooks.sweep", max_retries=0, time_limit=120, ignore_result=True)
def sweep() -> dict[str, int]:
    return hooks_sweep()


@shared_task(name="hooks.expire", max_retries=0, time_limit=300, ignore_result=True)
def expire() -> int:
    """Beat's pass: events done with and older than KAGENT_WEBHOOK_RETENTION_DAYS (0 keeps them), with their
    delivery logs, a bounded number."""
    if settings.KAGENT_WEBHOOK_RETENTION_DAYS <= 0:
        return 0
    return webhook_events_expire(before=timezone.now() - timedelta(days=settings.KAGENT_WEBHOOK_RETENTION_DAYS))
