"""Celery tasks for knowledge: interfaces like API views. They take ids and call a service."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from agents import services


@shared_task(
    name="agents.knowledge_fetch",
    bind=True,
    acks_late=True,
    max_retries=2,
    time_limit=60,
    soft_time_limit=45,
    ignore_result=True,
)
def knowledge_fetch(self: Any, source_id: str) -> None:
    # The task id stays the same across retries: it is the fetch's webhook-id, so the business can deduplicate.
    outcome = services.knowledge_source_fetch(source_id=source_id, message_id=f"kfetch_{self.request.id}")
    if outcome is not None and outcome.transient and self.request.retries < self.max_retries:
        raise self.retry(countdown=30 * (self.request.retries + 1))


@shared_task(name="agents.knowledge_refresh_due", max_retries=0, time_limit=120, ignore_result=True)
def knowledge_refresh_due() -> dict[str, int]:
    return services.knowledge_refresh_due()
