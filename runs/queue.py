"""Enqueueing a run for a worker, by task name (the writers of runs don't import the tasks that call them), and
which runs wait on the queue (the sweeper's question)."""

from __future__ import annotations

from kagent import broker

EXECUTE_TASK = "runs.execute"


def enqueue_run(run_id: str) -> None:
    """Queues `runs.execute` for the run (kagent.broker.enqueue: after commit; with the broker out of reach, the
    sweeper sends it once it has waited KAGENT_RUN_RESEND_SECONDS)."""
    broker.enqueue(EXECUTE_TASK, run_id)


def runs_waiting() -> set[str] | None:
    """The ids of the runs whose message waits on the broker's queue, not yet taken by a worker; None when that
    can't be told (see kagent.broker.waiting_arguments)."""
    return broker.waiting_arguments(EXECUTE_TASK)
