"""Celery tasks: interfaces like API views. They take ids and call a service."""

from __future__ import annotations

from celery import shared_task

from runs import engine, lifecycle


@shared_task(
    name="runs.execute",
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=0,
    time_limit=900,
    soft_time_limit=870,
    ignore_result=True,
)
def execute_run(run_id: str) -> None:
    # Claim first, then work: a duplicate delivery finds the run already claimed and does nothing.
    engine.run_execute(run_id)


@shared_task(name="runs.sweep", max_retries=0, time_limit=120, ignore_result=True)
def sweep() -> dict[str, int]:
    return lifecycle.run_sweep()
