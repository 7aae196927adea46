"""Two transactions raced in threads (each on its own database connection), for lock-order tests; a session's open
run with a new message on its session that holds the session's row while the other side comes; and the run tables'
foreign keys deferred again, as before runs/migrations/0010, to compare."""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection, connections

from agents.models import Agent
from agents.services import agent_create, agent_publish
from conversations import services as conversation
from conversations.models import Session
from kagent.models import ApiKey, Project
from runs import services
from runs.models import Run

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


@dataclass
class NewMessageRace:
    """A session whose run is in progress (held by claim 1), and `new_message`: run_create on the session, which
    sets `session_held` once it holds the session's row and waits half a second before superseding the open run —
    the other side of the race comes meanwhile."""

    project: Project
    key: ApiKey
    agent: Agent
    session: Session
    run: Run
    session_held: threading.Event

    def new_message(self) -> None:
        services.run_create(
            project=self.project, api_key=self.key, agent_id=self.agent.pk, text="again", session_id=self.session.pk
        )


def new_message_race(project: Project, monkeypatch: pytest.MonkeyPatch) -> NewMessageRace:
    agent = agent_create(project=project, name="a")
    agent_publish(agent=agent)
    key = ApiKey.objects.filter(project=project, kind=ApiKey.Kind.SECRET).first()
    assert key is not None
    session = conversation.session_create(project=project, api_key=key, agent_id=agent.pk)
    run = services.run_create(project=project, api_key=key, agent_id=agent.pk, text="hi", session_id=session.pk)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.IN_PROGRESS, claims=1)
    session_held = threading.Event()
    supersede = services.supersede_open_runs

    def supersede_later(locked: Any) -> None:
        session_held.set()  # run_create holds the session's row from here on
        time.sleep(0.5)  # the other side's statement comes meanwhile
        supersede(locked)

    monkeypatch.setattr(services, "supersede_open_runs", supersede_later)
    return NewMessageRace(project, key, agent, session, Run.objects.get(pk=run.pk), session_held)


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
