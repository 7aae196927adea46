"""The dashboard's run event stream (`/runs/{id}/events/`), which the test panel and the runs inspector follow: the
same events as the API's for the secret key, for a member signed in to the run's project, and a page that follows a
live run says so in its markup (the browser test watches it work)."""

from __future__ import annotations

import pytest
from django.test import Client

from agents.services import agent_create, agent_publish
from conversations.services import panel_session_create
from fakes.llm import calls, text
from runs import engine
from runs.models import RunEvent
from runs.services import run_create
from tests.dashboard.test_pages import signed_in
from tests.runs.test_run_events import read

HANDOFF = ("transfer_to_human", {"reason_type": "complaint", "summary": "Parcel arrived damaged"})


def _panel_run(tenant, fake_llm, script, turns):
    fake_llm.script(script, turns)
    model = {"provider": "openai_compatible", "name": f"script:{script}"}
    agent = agent_create(project=tenant.project, name=script, config={"model": model})
    agent_publish(agent=agent, note="")
    project = tenant.project
    session = panel_session_create(project=project, agent_id=agent.pk)
    run = run_create(project=project, api_key=None, agent_id=agent.pk, text="hi", session_id=session.pk, sandbox=True)
    return agent, run


def test_a_member_follows_a_runs_events(alice, fake_llm):
    agent, run = _panel_run(alice, fake_llm, "dash-events", [calls(HANDOFF), text("Someone will take over.")])
    member = signed_in(alice)
    # While it is queued, the inspector's live part and the panel's turn follow the stream from where they stand.
    live = member.get(f"/runs/{run.pk}/live/").content.decode()
    assert f'data-run-events="/runs/{run.pk}/events/?last_event_id=' in live and "every 1s" not in live
    engine.run_execute(run.pk)
    got = read(member.get(f"/runs/{run.pk}/events/"))
    assert [e["event"] for e in got] == [
        "run.queued",
        "run.in_progress",
        "run.step.created",
        "run.step.created",
        "run.step.created",
        "run.output.delta",
        "run.completed",
    ]
    assert got[3]["data"]["tool_call"]["arguments"]["summary"] == "Parcel arrived damaged"  # all of it, as for sk
    # Resumed after the end: 204, which tells the browser's EventSource to stop reconnecting.
    after_end = member.get(f"/runs/{run.pk}/events/", HTTP_LAST_EVENT_ID=str(got[-1]["id"]))
    assert after_end.status_code == 204 and after_end.content == b""
    # A finished run's page doesn't follow anything.
    assert "data-run-events" not in member.get(f"/runs/{run.pk}/live/").content.decode()
    assert "data-run-events" not in member.get(f"/agents/{agent.pk}/panel/runs/{run.pk}/").content.decode()


def test_another_organization_and_the_signed_out_get_nothing(alice, bob, fake_llm):
    _, run = _panel_run(alice, fake_llm, "dash-events-private", [text("x")])
    assert signed_in(bob).get(f"/runs/{run.pk}/events/").status_code == 404
    anonymous = Client().get(f"/runs/{run.pk}/events/")
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]


PAUSE_SHOWN = [
    ("/agents/{agent}/panel/runs/{run}/", "Submit output"),  # the test panel: the client tool's output is asked for
    ("/runs/{run}/live/", 'role="status">requires_action<'),  # the runs inspector: the status
]


@pytest.mark.parametrize(("page", "shown"), PAUSE_SHOWN)
def test_a_run_that_pauses_while_its_page_is_drawn_is_not_waited_for_forever(alice, fake_llm, monkeypatch, page, shown):
    # The page draws the run, then says from which event on it follows it. If the run pauses between the two, the
    # page must show the pause (or follow from before its event): never show the run working while following from
    # after the event that said it stopped — it would wait for an event that was already sent.
    from runs import run_events
    from tests.runs.test_lifecycle import CART

    fake_llm.script("dash-pause-race", [calls(("get_cart", {})), text("You have 2 items.")])
    model = {"provider": "openai_compatible", "name": "script:dash-pause-race"}
    agent = agent_create(project=alice.project, name="race", config={"model": model, "tools": {"client": [CART]}})
    agent_publish(agent=agent, note="")
    session = panel_session_create(project=alice.project, agent_id=agent.pk)
    run = run_create(
        project=alice.project, api_key=None, agent_id=agent.pk, text="cart?", session_id=session.pk, sandbox=True
    )
    looked = run_events.last_id
    moved: list[str] = []

    def paused_while_drawn(run_id: str) -> int:
        if not moved:
            moved.append(run_id)
            engine.run_execute(run_id)  # the worker pauses the run for its client tool now
        return looked(run_id)

    monkeypatch.setattr(run_events, "last_id", paused_while_drawn)
    html = signed_in(alice).get(page.format(agent=agent.pk, run=run.pk)).content.decode()
    assert moved
    assert RunEvent.objects.filter(run_id=run.pk, type="run.requires_action").exists()
    assert shown in html  # drawn as it is now, so following from the pause's event on misses nothing
