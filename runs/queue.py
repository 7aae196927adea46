"""Enqueueing a run for a worker: after the transaction that made it runnable commits, so a worker never looks
for a row it can't see yet. Sent by task name, so the writers of runs don't import the tasks that call them."""

from __future__ import annotations

import logging

from django.db import transaction

from kagent import broker

EXECUTE_TASK = "runs.execute"
logger = logging.getLogger(__name__)


def enqueue_run(run_id: str) -> None:
    """Queues `runs.execute` for the run once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: _send_committed(run_id))


def _send_committed(run_id: str) -> None:
    """The run is committed whatever happens here: with the broker out of reach, the request still answers with it
    (an error would make the app try again and start the run twice), and the sweeper sends its message once it has
    waited KAGENT_RUN_RESEND_SECONDS."""
    try:
        send_run(run_id)
    except Exception:
        logger.warning("run %s: the broker is out of reach; the sweeper will send it again", run_id, exc_info=True)


def send_run(run_id: str) -> None:
    """Queues `runs.execute` now (the sweeper's resend: the run's row is long committed)."""
    broker.send(EXECUTE_TASK, run_id)


def runs_waiting() -> set[str] | None:
    """The ids of the runs whose message waits on the broker's queue, not yet taken by a worker; None when that
    can't be told (see kagent.broker.waiting_arguments)."""
    return broker.waiting_arguments(EXECUTE_TASK)
