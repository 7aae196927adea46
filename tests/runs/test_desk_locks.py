"""A desk built-in of a session's open run racing a new message on that session: the foreign keys of the desk's rows
are checked in the INSERT (runs/migrations/0010), so the built-in takes the session's row before its INSERT locks
the run's (a new message takes the session's row, then the open run's to supersede it)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from agents.services import agent_create, agent_publish
from kagent.models import ApiKey
from runs import builtin_tools, services
from runs.models import Run, ToolCall
from tests.races import race

pytestmark = pytest.mark.django_db(transaction=True)

ARGUMENTS = {
    "transfer_to_human": {"reason_type": "other", "summary": "The customer asks for a person."},
    "create_ticket": {"title": "Broken item", "description": "Arrived broken."},
}


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
def test_a_desk_builtin_and_a_new_message_on_its_session_do_not_deadlock(alice: Any, name: str, monkeypatch) -> None:
    agent = agent_create(project=alice.project, name="a")
    agent_publish(agent=agent)
    key = ApiKey.objects.filter(project=alice.project, kind=ApiKey.Kind.SECRET).first()
    session = services.session_create(project=alice.project, api_key=key, agent_id=agent.pk)
    run = services.run_create(project=alice.project, api_key=key, agent_id=agent.pk, text="hi", session_id=session.pk)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.IN_PROGRESS, claims=1)
    run = Run.objects.get(pk=run.pk)
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
    session_held = threading.Event()
    supersede = services._supersede_open_runs

    def supersede_later(locked: Any) -> None:
        session_held.set()  # run_create holds the session's row (FOR UPDATE) from here on
        time.sleep(0.5)  # the built-in's INSERT comes meanwhile
        supersede(locked)

    monkeypatch.setattr(services, "_supersede_open_runs", supersede_later)

    def new_message() -> None:
        services.run_create(project=alice.project, api_key=key, agent_id=agent.pk, text="again", session_id=session.pk)

    def builtin() -> None:
        session_held.wait(5)
        builtin_tools.builtin_execute(run=run, call=call, name=name, arguments=ARGUMENTS[name], fields={})

    assert race(run_create=new_message, builtin=builtin) == {}
    assert Run.objects.get(pk=run.pk).cancel_requested  # superseded
