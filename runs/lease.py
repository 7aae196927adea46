"""A run's wait on something slow (a model call with its retries, an HTTP tool's exchange): the lease kept, and no
database connection held.

Every fenced write extends the lease, so a worker only needs help while it waits without writing. One thread per
worker process renews the leases of the runs registered with it that have waited longer than a third of the lease —
all of them in one statement a tick, however many runs the process holds — so the common fast model call costs a
dict insert and a delete, not a thread or a statement.

While it waits, the run's thread gives its database connection back to the process's pool (settings: Django's pool):
a worker holds hundreds of runs waiting on the model with a handful of connections. The next statement after the wait
takes one again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

logger = logging.getLogger(__name__)


def lease() -> timedelta:
    return timedelta(seconds=settings.KAGENT_RUN_LEASE_SECONDS)


def release_connection() -> None:
    """Gives this thread's database connection back to the pool, unless a transaction is open on it."""
    if not connection.in_atomic_block:
        connection.close()


_RENEW_SQL = """
UPDATE runs_run AS run SET lease_expires_at = %(until)s
FROM unnest(%(ids)s::text[], %(claims)s::int[]) AS held(id, claims)
WHERE run.id = held.id AND run.claims = held.claims AND run.status = 'in_progress'
"""


class LeaseKeeper:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[int, float]] = {}  # run id -> (claim held, when the wait began)
        self._wake = threading.Event()
        self._sleeping = 0.0  # how long the thread's current sleep is
        self._thread: threading.Thread | None = None
        self._pid = 0

    @contextmanager
    def kept(self, run_id: str, *, held_by: int) -> Iterator[None]:
        """While inside, the lease of `run_id` (held by claim `held_by`) is renewed if the wait gets long, and this
        thread holds no database connection (unless something inside takes one)."""
        self._ensure_thread()
        release_connection()
        with self._lock:
            self._waiting[run_id] = (held_by, time.monotonic())
        # The thread isn't woken: it looks every min(period / 2, 5 s), so a wait is renewed at the latest
        # 1.5 periods after it began, well inside the lease of 3 periods counted from the run's last write (a
        # wake-up of that thread for every model call was a thread switch and a GIL hand-off on the hot path).
        # Unless it is sleeping longer than that, the lease having been shortened since it fell asleep (the tests do).
        if self._sleeping > self._look_every():
            self._wake.set()
        try:
            yield
        finally:
            with self._lock:
                self._waiting.pop(run_id, None)

    def _ensure_thread(self) -> None:
        # A prefork worker's child inherits the parent's object but not its thread: start one per process.
        if self._thread is not None and self._thread.is_alive() and self._pid == os.getpid():
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._renew_forever, name="lease-keeper", daemon=True)
                self._thread.start()

    def _period(self) -> float:
        return max(1.0, settings.KAGENT_RUN_LEASE_SECONDS / 3)

    def _look_every(self) -> float:
        return min(self._period() / 2, 5.0)

    def _renew_forever(self) -> None:
        while True:
            self._sleeping = self._look_every()
            self._wake.wait(self._sleeping)
            self._wake.clear()
            try:
                self.renew_due()
            except Exception:  # a database hiccup: the next tick tries again, and the sweeper is the safety net
                logger.warning("could not renew run leases", exc_info=True)
            finally:
                release_connection()

    def renew_due(self) -> int:
        """Renews, in one statement, the lease of every run that has waited a period or more; how many."""
        now = time.monotonic()
        with self._lock:
            due = {run_id: held for run_id, (held, since) in self._waiting.items() if now - since >= self._period()}
        if not due:
            return 0
        with connection.cursor() as cursor:
            cursor.execute(
                _RENEW_SQL,
                {
                    "until": timezone.now() + lease(),  # the clock every lease is written with (runs/engine/)
                    "ids": list(due),
                    "claims": list(due.values()),
                },
            )
        renewed_at = time.monotonic()
        with self._lock:
            for run_id, held_by in due.items():
                if self._waiting.get(run_id, (None, 0.0))[0] == held_by:
                    self._waiting[run_id] = (held_by, renewed_at)
        return len(due)


KEEPER = LeaseKeeper()
