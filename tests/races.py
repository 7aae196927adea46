"""Two transactions raced in threads (each on its own database connection), for lock-order tests; and the run
tables' foreign keys deferred again, as before runs/migrations/0010, to compare."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, connections

MIGRATION = importlib.import_module("runs.migrations.0010_foreign_keys_checked_in_statement")


def race(**sides: Callable[[], object]) -> dict[str, BaseException]:
    """Runs each side in a thread of its own (each waits on its own events to force the interleaving) and returns
    what each side that failed raised, by its name."""
    errors: dict[str, BaseException] = {}

    def side(name: str, work: Callable[[], object]) -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors[name] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=side, args=item) for item in sides.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return errors


def set_keys(deferrable: bool) -> None:
    to = "DEFERRABLE INITIALLY DEFERRED" if deferrable else "NOT DEFERRABLE"
    with connection.cursor() as cursor:
        cursor.execute(MIGRATION._KEYS, [list(MIGRATION.RUN_TABLES), not deferrable])
        for table, name in cursor.fetchall():
            cursor.execute(f'ALTER TABLE "{table}" ALTER CONSTRAINT "{name}" {to}')


@pytest.fixture(params=[False, True], ids=["immediate", "deferred"])
def deferred(request: Any) -> Iterator[bool]:
    """Each test twice: with the keys as they are, and deferred again."""
    if request.param:
        set_keys(True)
    try:
        yield request.param
    finally:
        if request.param:
            connections.close_all()
            set_keys(False)
