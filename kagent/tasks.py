"""Housekeeping tasks of the project package."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from kagent.services import egress_events_expire


@shared_task(name="kagent.ping", max_retries=0, time_limit=30)
def ping(token: str) -> str:
    """Answers through the cache so a caller in another process can see the worker ran it (used by /healthz
    checks and the worker test)."""
    cache.set(f"kagent:ping:{token}", "pong", timeout=300)
    return "pong"


@shared_task(name="kagent.egress_expire", max_retries=0, time_limit=300, ignore_result=True)
def egress_expire() -> int:
    """Beat's pass: egress log rows older than KAGENT_EGRESS_RETENTION_DAYS (0 keeps them), a bounded number."""
    if settings.KAGENT_EGRESS_RETENTION_DAYS <= 0:
        return 0
    return egress_events_expire(before=timezone.now() - timedelta(days=settings.KAGENT_EGRESS_RETENTION_DAYS))
