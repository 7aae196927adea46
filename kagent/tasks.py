"""Housekeeping tasks of the project package."""

from __future__ import annotations

from celery import shared_task
from django.core.cache import cache


@shared_task(name="kagent.ping", max_retries=0, time_limit=30)
def ping(token: str) -> str:
    """Answers through the cache so a caller in another process can see the worker ran it (used by /healthz
    checks and the worker test)."""
    cache.set(f"kagent:ping:{token}", "pong", timeout=300)
    return "pong"
