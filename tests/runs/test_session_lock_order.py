"""A session run completing while a new message arrives on its session: the completion's one statement updates the
run's row, then its assistant message's key takes the session's row (FOR KEY SHARE); a new message (run_create)
holds the session's row, then takes the open run's to supersede it. run_create takes the session's row FOR NO KEY
UPDATE (one new run at a time per session, without blocking the rows that only refer to the session), so the two
do not wait for each other.

`deferred`: the same race with the run tables' keys deferred again (as before runs/migrations/0010): a statement
run alone commits at once, so its key checks came as late then, and the race deadlocked already."""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections
from django.utils import timezone

from agents.services import agent_create, agent_publish
from kagent.models import ApiKey
from runs import services, store
from runs.models import Message as ChatMessage
from runs.models import Run, RunStep

pytestmark = pytest.mark.django_db(transaction=True)

MIGRATION = importlib.import_module("runs.migrations.0010_foreign_keys_checked_in_statement")


def _set_keys(deferrable: bool) -> None:
    to = "DEFERRABLE INITIALLY DEFERRED" if deferrable else "NOT DEFERRABLE"
    with connection.cursor() as cursor:
        cursor.execute(MIGRATION._KEYS, [list(MIGRATION.RUN_TABLES), not deferrable])
        for table, name in cursor.fetchall():
            cursor.execute(f'ALTER TABLE "{table}" ALTER CONSTRAINT "{name}" {to}')


@pytest.fixture(params=[False, True], ids=["immediate", "deferred"])
def deferred(request: Any) -> Iterator[bool]:
    if request.param:
        _set_keys(True)
    try:
        yield request.param
    finally:
        if request.param:
            connections.close_all()
            _set_keys(False)


def test_a_completion_and_a_new_message_on_its_session_do_not_deadlock(alice: Any, deferred: bool, monkeypatch) -> None:
    agent = agent_create(project=alice.project, name="a")
    agent_publish(agent=agent)
    key = ApiKey.objects.filter(project=alice.project, kind=ApiKey.Kind.SECRET).first()
    session = services.session_create(project=alice.project, api_key=key, agent_id=agent.pk)
    run = services.run_create(project=alice.project, api_key=key, agent_id=agent.pk, text="hi", session_id=session.pk)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.IN_PROGRESS, claims=1)
    run = Run.objects.get(pk=run.pk)

    session_held = threading.Event()
    supersede = services._supersede_open_runs

    def supersede_later(locked: Any) -> None:
        session_held.set()  # run_create holds the session's row from here on
        time.sleep(0.5)  # the completion's statement comes meanwhile
        supersede(locked)

    monkeypatch.setattr(services, "_supersede_open_runs", supersede_later)
    errors: dict[str, BaseException] = {}

    def new_message() -> None:
        try:
            services.run_create(
                project=alice.project, api_key=key, agent_id=agent.pk, text="again", session_id=session.pk
            )
        except BaseException as exc:  # noqa: BLE001
            errors["run_create"] = exc
        finally:
            connections.close_all()

    def completion() -> None:
        session_held.wait(5)
        try:
            step = RunStep(run=run, kind=RunStep.Kind.MODEL_CALL, round=1, data={})
            store.complete(
                run,
                held_by=1,
                text="Hello.",
                output={"text": "Hello.", "unverified_claims": []},
                transcript=[],
                step=step,
                now=timezone.now(),
            )
        except BaseException as exc:  # noqa: BLE001
            errors["complete"] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=new_message), threading.Thread(target=completion)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == {}
    assert Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED  # it finished before it could be superseded
    assert ChatMessage.objects.filter(session=session).count() == 3  # hi, the answer, again
