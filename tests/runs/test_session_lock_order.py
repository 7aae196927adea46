"""A session run completing while a new message arrives on its session: the completion's one statement updates the
run's row, then its assistant message's key takes the session's row (FOR KEY SHARE); a new message (run_create)
holds the session's row, then takes the open run's to supersede it. run_create takes the session's row FOR NO KEY
UPDATE (one new run at a time per session, without blocking the rows that only refer to the session), so the two
do not wait for each other.

`deferred`: the same race with the run tables' keys deferred again (as before runs/migrations/0010): a statement
run alone commits at once, so its key checks came as late then, and the race deadlocked already."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from conversations.models import Message as ChatMessage
from runs import store
from runs.models import Run, RunStep
from tests.races import new_message_race, race

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_completion_and_a_new_message_on_its_session_do_not_deadlock(alice: Any, deferred: bool, monkeypatch) -> None:
    setup = new_message_race(alice.project, monkeypatch)
    run, session = setup.run, setup.session

    def completion() -> None:
        setup.session_held.wait(5)
        step = RunStep(run=run, kind=RunStep.Kind.MODEL_CALL, round=1, data={})
        store.complete(
            run,
            held_by=1,
            text="Hello.",
            output={"text": "Hello.", "unverified_claims": [], "claims": []},
            transcript=[],
            step=step,
            now=timezone.now(),
        )

    assert race(run_create=setup.new_message, complete=completion) == {}
    assert Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED  # it finished before it could be superseded
    assert ChatMessage.objects.filter(session=session).count() == 3  # hi, the answer, again


def test_a_conversations_events_commit_in_the_order_of_their_ids(alice: Any, monkeypatch) -> None:
    """A stream sends the events after the last id it sent: one committed later with a lower id would be lost. A
    run's completion (which holds its run's row, not the session's) draws its message's event id under the
    conversation's advisory lock, which every other writer of the conversation's events holds to its commit."""
    import threading

    from django.db import connection, transaction

    from conversations import session_events
    from conversations.models import SessionEvent

    setup = new_message_race(alice.project, monkeypatch)
    run, session = setup.run, setup.session
    held, release, done = threading.Event(), threading.Event(), threading.Event()

    def other_writer() -> None:  # a team message's transaction, between its event and its commit
        try:
            with transaction.atomic():
                session_events._in_order(session.pk)
                held.set()
                release.wait(10)
        finally:
            connection.close()

    def completion() -> None:
        try:
            held.wait(5)
            store.complete(
                run,
                held_by=1,
                text="Hello.",
                output={"text": "Hello.", "unverified_claims": [], "claims": []},
                transcript=[],
                step=RunStep(run=run, kind=RunStep.Kind.MODEL_CALL, round=1, data={}),
                now=timezone.now(),
            )
            done.set()
        finally:
            connection.close()

    writer, completing = threading.Thread(target=other_writer), threading.Thread(target=completion)
    writer.start()
    completing.start()
    assert not done.wait(1.0)  # the completion waits for the other writer's commit before it draws its id
    release.set()
    writer.join(10)
    completing.join(10)
    assert done.is_set()
    assert SessionEvent.objects.filter(session=session, type="session.message.created").count() == 2  # hi, Hello.
