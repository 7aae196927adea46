"""Celery tasks: interfaces like API views. They take ids and call a service."""

from __future__ import annotations

from celery import shared_task

from checks import services


# The task's name is older than this app (it was the run app's): a message queued by a worker of before keeps
# finding it.
@shared_task(name="runs.check_run_execute", max_retries=0, time_limit=1800, ignore_result=True)
def check_run_execute(check_run_id: str) -> None:
    # An agent's checks, against its draft or a version (checks/services.py); each check's runs are driven here.
    services.check_run_execute(check_run_id)


@shared_task(name="checks.sweep", max_retries=0, time_limit=120, ignore_result=True)
def sweep() -> dict[str, int]:
    return {"check_runs_ended": services.check_runs_expire()}  # a check run whose process died
