"""A helpdesk relay's view of the live handoff (SPEC §4 "Live handoff"), through a real HTTPS receiver that
verifies each signature: `session.updated` when the conversation goes to the team and back; `session.message.created`
for every message of a conversation that is or was with the team (the customer's, the team's, the agent's after the
hand-back), never for a conversation the agent alone had; each event's data the object as it was at the event. And a
run's terminal webhook carries the run as the completion wrote it."""

from __future__ import annotations

import pytest

from fakes.llm import calls, text
from hooks.models import WebhookEvent
from runs.models import Run
from tests.hooks.conftest import create_endpoint, pump, received
from tests.hooks.test_delivery import verify
from tests.runs.conftest import VERIFIED

pytestmark = pytest.mark.django_db

TYPES = ["session.message.created", "session.updated"]


def test_a_relay_gets_the_team_part_of_the_conversation_signed(hk, upstream):
    endpoint = create_endpoint(hk.api, upstream, types=TYPES)
    agent = hk.agent(
        "relay",
        [
            text("Hello! How can I help?"),
            calls(("transfer_to_human", {"reason_type": "complaint", "summary": "Wants a person"})),
            text("A person from the team will continue here."),
            text("Glad it's sorted."),
        ],
    )
    session = hk.session(agent, **VERIFIED)
    hk.run(agent, "hi", session=session, **VERIFIED)
    pump()
    assert received(upstream) == []  # the agent alone: nothing for the helpdesk

    hk.run(agent, "I want a person", session=session, **VERIFIED)
    hk.api.post(f"/v1/sessions/{session}/messages", {"role": "user", "content": "Still there?"}, format="json")
    hk.api.post(
        f"/v1/sessions/{session}/messages",
        {"role": "team", "content": "Yes! Maya here.", "author": "Maya"},
        format="json",
    )
    hk.api.patch(f"/v1/sessions/{session}", {"status": "open"}, format="json")
    hk.run(agent, "thanks", session=session, **VERIFIED)
    pump()

    got = received(upstream)
    for request, body in got:
        assert verify(request, endpoint.secret) == body
    seen = [
        (body["type"], body["data"].get("role") or body["data"].get("status"), body["data"].get("content"))
        for _, body in got
    ]
    # In the order they happened (one event each; the receiver gets them in the order they were dispatched).
    assert sorted(seen, key=str) == sorted(
        [
            ("session.updated", "handed_off", None),
            ("session.message.created", "assistant", "A person from the team will continue here."),
            ("session.message.created", "user", "Still there?"),
            ("session.message.created", "team", "Yes! Maya here."),
            ("session.updated", "open", None),
            ("session.message.created", "user", "thanks"),
            ("session.message.created", "assistant", "Glad it's sorted."),
        ],
        key=str,
    )
    team = next(body["data"] for _, body in got if body["data"].get("role") == "team")
    assert team["author"] == "Maya" and team["object"] == "message" and team["run"] is None
    # The session as it was at each event, not as it is when the relay reads it.
    statuses = [body["data"]["status"] for _, body in got if body["type"] == "session.updated"]
    assert sorted(statuses) == ["handed_off", "open"]


def test_webhook_events_carry_the_object_as_it_was_at_the_event(hk, upstream):
    create_endpoint(hk.api, upstream, types=["run.completed", "session.updated"])
    agent = hk.agent("as-then", [text("Hello there.")])
    session = hk.session(agent)
    run = hk.run(agent, "hi", session=session)
    hk.api.post(f"/v1/sessions/{session}/messages", {"role": "team", "content": "Hi", "author": "Al"}, format="json")
    hk.api.patch(f"/v1/sessions/{session}", {"status": "closed"}, format="json")

    completed = WebhookEvent.objects.get(type="run.completed")
    assert completed.data == hk.get(run["id"])  # rendered by the completion's own statement
    # Changed afterwards (nothing the API does changes an ended run; a direct write stands for any later change):
    # what was recorded is what is sent.
    Run.objects.filter(pk=run["id"]).update(metadata={"changed": "later"})
    updates = WebhookEvent.objects.filter(type="session.updated").order_by("created_at")
    assert [event.data["status"] for event in updates] == ["handed_off", "closed"]
    pump()
    sent = {body["type"]: body["data"] for _, body in received(upstream) if body["type"] == "run.completed"}
    assert sent["run.completed"]["metadata"] == {} and sent["run.completed"]["output"]["text"] == "Hello there."


def test_test_panel_conversations_send_nothing(hk, upstream, alice):
    from conversations.models import Session

    create_endpoint(hk.api, upstream, types=TYPES)
    agent = hk.agent("panel", [text("Hi.")])
    session = hk.session(agent)
    Session.objects.filter(pk=session).update(is_test=True)  # as the test panel's sessions are
    hk.api.post(f"/v1/sessions/{session}/messages", {"role": "team", "content": "Hi", "author": "Al"}, format="json")
    pump()
    assert received(upstream) == []
