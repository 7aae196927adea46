"""A desk built-in of a session's open run racing a new message on that session: the foreign keys of the desk's rows
are checked in the INSERT (runs/migrations/0010), so the built-in takes the session's row before its INSERT locks
the run's (a new message takes the session's row, then the open run's to supersede it)."""

from __future__ import annotations

from typing import Any

import pytest

from runs import executors
from runs.models import Run, ToolCall
from tests.races import new_message_race, race

pytestmark = pytest.mark.django_db(transaction=True)

ARGUMENTS = {
    "transfer_to_human": {"reason_type": "other", "summary": "The customer asks for a person."},
    "create_ticket": {"title": "Broken item", "description": "Arrived broken."},
}


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
def test_a_desk_builtin_and_a_new_message_on_its_session_do_not_deadlock(alice: Any, name: str, monkeypatch) -> None:
    setup = new_message_race(alice.project, monkeypatch)
    run = setup.run
    call = ToolCall.objects.create(
        project=alice.project,
        run=run,
        round=1,
        index=0,
        model_call_id="m",
        requested_name=name,
        name=name,
        rate_key="r",
    )

    def builtin() -> None:
        setup.session_held.wait(5)
        executors.builtin_execute(run=run, call=call, name=name, arguments=ARGUMENTS[name], fields={})

    assert race(run_create=setup.new_message, builtin=builtin) == {}
    assert Run.objects.get(pk=run.pk).cancel_requested  # superseded
