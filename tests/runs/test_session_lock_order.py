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

from runs import store
from runs.models import Message as ChatMessage
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
            output={"text": "Hello.", "unverified_claims": []},
            transcript=[],
            step=step,
            now=timezone.now(),
        )

    assert race(run_create=setup.new_message, complete=completion) == {}
    assert Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED  # it finished before it could be superseded
    assert ChatMessage.objects.filter(session=session).count() == 3  # hi, the answer, again
