"""Celery tasks: interfaces like API views. They take ids and call a service."""

from __future__ import annotations

from celery import shared_task

from runs import checks, engine, services


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
    counts = services.run_sweep()
    counts["check_runs_ended"] = checks.check_runs_expire()  # a check run whose process died
    return counts


@shared_task(name="runs.check_run_execute", max_retries=0, time_limit=1800, ignore_result=True)
def check_run_execute(check_run_id: str) -> None:
    # An agent's checks, against its draft or a version (runs/checks.py); each check's runs are driven here.
    checks.check_run_execute(check_run_id)
