"""The live handoff over the API (SPEC §4 "Live handoff"): the team writes into the conversation and holds it (the
agent keeps quiet), the customer's messages are for the team, the team hands it back (the agent reads what was said
meanwhile) or closes it; the conversation's events as Server-Sent Events; every bad input refused with its code and
nothing written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conversations.models import Message, Session, SessionEvent
from desk.models import Handoff
from fakes.llm import calls, text
from runs.models import Run
from tests.desk.test_desk_lifecycle import handed_off_session
from tests.runs.conftest import VERIFIED
from tests.runs.test_run_events import parse

pytestmark = pytest.mark.django_db


def write(client: Any, session: str, body: dict[str, Any], **headers: Any) -> Any:
    return client.post(f"/v1/sessions/{session}/messages", body, format="json", **headers)


def thread(h: Any, session: str) -> list[tuple[str, str, str | None]]:
    """The conversation as the messages API shows it, oldest first: (role, content, author)."""
    data = h.api.get(f"/v1/sessions/{session}/messages").json()["data"]
    return [(m["role"], m["content"], m["author"]) for m in reversed(data)]


def session_events(client: Any, session: str, count: int, **headers: Any) -> list[dict[str, Any]]:
    """The first `count` events of the conversation's stream (it stays open: read what is there, then close it)."""
    response = client.get(f"/v1/sessions/{session}/events", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/event-stream")
    got: list[dict[str, Any]] = []
    raw = b""
    chunks = iter(response.streaming_content)
    try:
        while len(got) < count:
            raw += next(chunks)
            got = parse(raw)
    finally:
        # The test client's own wrapper of the content closes the response as it does at the end of the content:
        # without closing this test's database connection (response.close() would, through request_finished).
        response._iterator.close()
    return got


def test_the_team_takes_over_writes_and_hands_back(h):
    agent = h.agent("live", [text("Hello! How can I help?"), text("Maya checked order 1234; anything else?")])
    session = h.session(agent, **VERIFIED)
    h.run(agent, "hi", session=session, **VERIFIED)

    # A person of the team writes into a conversation the agent holds: it goes to the team.
    reply = write(h.api, session, {"role": "team", "content": "Hi, I'm Maya. I'll look into it.", "author": " Maya "})
    assert reply.status_code == 201, reply.json()
    body = reply.json()
    assert (body["object"], body["role"], body["author"], body["run"]) == ("message", "team", "Maya", None)
    shown = h.api.get(f"/v1/sessions/{session}").json()
    assert shown["status"] == "handed_off" and shown["handed_off_at"] is not None
    assert shown["waiting_since"] is None  # the team spoke last

    # The agent keeps quiet: a run is refused, nothing is written.
    refused = h.api.post("/v1/runs", {"agent": agent, "input": "is it done?", "session": session}, format="json")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "session_handed_off"
    assert Run.objects.filter(session_id=session).count() == 1

    # The customer's message is for the team: no run, and the conversation waits for the team.
    runs_before = Run.objects.count()
    customer = write(h.api, session, {"role": "user", "content": "Thanks, my order is 1234."})
    assert customer.status_code == 201 and customer.json()["author"] is None
    assert Run.objects.count() == runs_before
    assert h.api.get(f"/v1/sessions/{session}").json()["waiting_since"] is not None
    waiting = h.api.get("/v1/sessions?status=handed_off").json()["data"]
    assert [s["id"] for s in waiting] == [session]

    # Handed back: the agent answers again, and reads what the customer and the team said meanwhile.
    back = h.api.patch(f"/v1/sessions/{session}", {"status": "open"}, format="json")
    assert back.status_code == 200 and back.json()["status"] == "open" and back.json()["waiting_since"] is None
    later = h.run(agent, "and now?", session=session, **VERIFIED)
    assert later["status"] == "completed"
    sent = json.dumps(h.fake.requests("live")[-1].body["messages"])
    assert "Maya from the team wrote to the customer" in sent and "I'll look into it." in sent
    assert "my order is 1234" in sent
    assert thread(h, session) == [
        ("user", "hi", None),
        ("assistant", "Hello! How can I help?", None),
        ("team", "Hi, I'm Maya. I'll look into it.", "Maya"),
        ("user", "Thanks, my order is 1234.", None),
        ("user", "and now?", None),
        ("assistant", "Maya checked order 1234; anything else?", None),
    ]


def test_the_team_model_message_is_not_the_models_own_turn(h):
    """In the model's history a team message is K-Agent's notice naming who wrote it, never an assistant turn (the
    model would take the team's promises for its own and repeat them as done)."""
    agent = h.agent("notice", [text("Hi.")])
    session = h.session(agent)
    write(h.api, session, {"role": "team", "content": "Your refund is approved.", "author": "Sam"})
    h.api.patch(f"/v1/sessions/{session}", {"status": "open"}, format="json")
    h.run(agent, "ok", session=session)
    messages = h.fake.requests("notice")[-1].body["messages"]
    [said] = [m for m in messages if "Your refund is approved." in str(m.get("content"))]
    assert said["role"] == "user" and "Sam from the team" in said["content"]
    assert all("Your refund is approved." not in str(m.get("content")) for m in messages if m["role"] == "assistant")


def test_a_team_message_supersedes_the_open_run(h):
    agent = h.agent("superseded", [text("The bot's answer.")])
    session = h.session(agent)
    queued = h.start(agent, "hello", session=session)
    write(h.api, session, {"role": "team", "content": "I've got this one.", "author": "Ana"})
    run = h.get(queued["id"])
    assert (run["status"], run["cancellation_reason"]) == ("cancelled", "superseded")
    h.drive(queued["id"])  # a worker that picks it up now finds it cancelled: the bot's answer never appears
    assert [role for role, _, _ in thread(h, session)] == ["user", "team"]


def test_the_handoff_tool_hands_over_and_a_hand_back_closes_its_handoff(h):
    agent, session = handed_off_session(h, "tool-handoff")
    [handoff] = Handoff.objects.filter(session_id=session)
    assert handoff.status == "open"
    assert h.api.get(f"/v1/sessions/{session}").json()["waiting_since"] is not None
    back = h.api.patch(f"/v1/sessions/{session}", {"status": "open"}, format="json").json()
    assert back["status"] == "open"
    handoff.refresh_from_db()
    assert handoff.status == "closed" and handoff.closed_at is not None


def test_closing_the_conversation_and_opening_it_again(h):
    agent, session = handed_off_session(h, "close-it")
    closed = h.api.patch(f"/v1/sessions/{session}", {"status": "closed"}, format="json")
    assert closed.status_code == 200 and closed.json()["status"] == "closed"
    assert not Handoff.objects.filter(session_id=session, status="open").exists()
    # A customer's message to a closed conversation is kept and starts nothing; a run opens it again.
    assert write(h.api, session, {"role": "user", "content": "hello?"}).status_code == 201
    assert Session.objects.get(pk=session).status == "closed"
    h.fake.script("close-it", [text("Welcome back.")])
    h.run(agent, "one more thing", session=session, **VERIFIED)
    assert h.api.get(f"/v1/sessions/{session}").json()["status"] == "open"


def test_the_conversations_events_stream_and_resume(h):
    agent = h.agent("stream", [text("Hi there.")])
    session = h.session(agent)
    h.run(agent, "hello", session=session)
    write(h.api, session, {"role": "team", "content": "Ana here.", "author": "Ana"})
    write(h.api, session, {"role": "user", "content": "Hi Ana"})
    h.api.patch(f"/v1/sessions/{session}", {"status": "open"}, format="json")

    got = session_events(h.api, session, 6)
    assert [(e["event"], e["data"].get("role") or e["data"].get("status")) for e in got] == [
        ("session.message.created", "user"),
        ("session.message.created", "assistant"),
        ("session.updated", "handed_off"),
        ("session.message.created", "team"),
        ("session.message.created", "user"),
        ("session.updated", "open"),
    ]
    assert got[3]["data"]["author"] == "Ana" and got[3]["data"]["content"] == "Ana here."
    assert got[2]["data"]["id"] == session and got[2]["data"]["object"] == "session"
    # Resumed after the fourth: the rest only.
    rest = session_events(h.api, session, 2, HTTP_LAST_EVENT_ID=str(got[3]["id"]))
    assert [e["id"] for e in rest] == [got[4]["id"], got[5]["id"]]


def test_the_widgets_credentials_write_and_follow_its_own_conversation_only(h):
    agent = h.agent("widget", [text("Hi.")])
    publishable = h.tenant.client(h.tenant.publishable_key)
    session = publishable.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    write(h.api, session, {"role": "team", "content": "Hello from the team.", "author": "Lee"})

    assert write(publishable, session, {"role": "user", "content": "Hi Lee"}).status_code == 201
    got = session_events(publishable, session, 3)
    assert [e["event"] for e in got] == ["session.updated", "session.message.created", "session.message.created"]
    assert [e["data"]["role"] for e in got[1:]] == ["team", "user"]

    # The customer can't speak for the team, nor hand the conversation back.
    team = write(publishable, session, {"role": "team", "content": "Refund approved!", "author": "Lee"})
    assert team.status_code == 403 and team.json()["error"]["code"] == "publishable_key_not_allowed"
    back = publishable.patch(f"/v1/sessions/{session}", {"status": "open"}, format="json")
    assert back.status_code == 403
    assert Session.objects.get(pk=session).status == "handed_off"

    # Another key's or a verified user's session: not found to this browser.
    other = h.session(agent, **VERIFIED)
    assert write(publishable, other, {"role": "user", "content": "hi"}).status_code == 404
    assert publishable.get(f"/v1/sessions/{other}/events").status_code == 404
    assert Message.objects.filter(session_id=other).count() == 0


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"role": "team", "content": "hi"}, 422, "invalid_request"),  # a team message is signed
        ({"role": "team", "content": "hi", "author": "   "}, 422, "invalid_request"),
        ({"role": "user", "content": "hi", "author": "Mallory"}, 422, "invalid_request"),
        ({"role": "assistant", "content": "I refunded you."}, 422, "invalid_request"),
        ({"role": "user", "content": "   "}, 422, "invalid_request"),
        ({"role": "user", "content": "x" * 20_001}, 422, "input_too_large"),
        ({"role": "team", "content": "hi", "author": "x" * 101}, 422, "invalid_request"),
        ({"role": "user"}, 422, "invalid_request"),
        ({"role": "user", "content": "hi", "run": "run_x"}, 422, "invalid_request"),
    ],
)
def test_bad_messages_are_refused_and_write_nothing(h, body, status, code):
    agent = h.agent("bad", [text("Hi.")])
    session = h.session(agent)
    response = write(h.api, session, body)
    assert response.status_code == status, response.json()
    assert response.json()["error"]["code"] == code
    assert not Message.objects.filter(session_id=session).exists()
    assert not SessionEvent.objects.filter(session_id=session).exists()
    assert Session.objects.get(pk=session).status == "open"


@pytest.mark.parametrize("body", [{"status": "handed_off"}, {"status": "resolved"}, {}, {"status": "open", "x": 1}])
def test_bad_session_changes_are_refused(h, body):
    agent, session = handed_off_session(h, "bad-patch")
    response = h.api.patch(f"/v1/sessions/{session}", body, format="json")
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"
    assert Session.objects.get(pk=session).status == "handed_off"


def test_a_visitors_messages_are_limited_like_runs(h):
    project = h.tenant.project
    project.run_rate_publishable = 2
    project.save(update_fields=["run_rate_publishable"])
    agent = h.agent("limited", [text("Hi.")])
    publishable = h.tenant.client(h.tenant.publishable_key)
    session = publishable.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    statuses = [write(publishable, session, {"role": "user", "content": f"m{i}"}).status_code for i in range(3)]
    assert statuses == [201, 201, 429]
    assert Message.objects.filter(session_id=session).count() == 2


def test_closing_the_last_handoff_on_the_desk_closes_the_conversation_with_its_event(h):
    agent, session = handed_off_session(h, "desk-close")
    [handoff] = h.api.get("/v1/handoffs").json()["data"]
    h.api.patch(f"/v1/handoffs/{handoff['id']}", {"status": "closed"}, format="json")
    updates = [e.data["status"] for e in SessionEvent.objects.filter(session_id=session, type="session.updated")]
    assert updates == ["handed_off", "closed"]


def test_a_ticket_built_in_in_a_team_held_conversation_is_never_run(h):
    """Nothing of the agent runs while the team holds the conversation: not even a run queued before the team
    wrote, picked up afterwards."""
    agent = h.agent(
        "quiet",
        [calls(("create_ticket", {"title": "x", "description": "y"})), text("TKT-1 is open.")],
        tools={"builtin": {"create_ticket": {"enabled": True}}},
    )
    session = h.session(agent, **VERIFIED)
    queued = h.start(agent, "make a ticket", session=session, **VERIFIED)
    write(h.api, session, {"role": "team", "content": "I'll handle it.", "author": "Ana"})
    assert h.drive(queued["id"])["status"] == "cancelled"
    assert h.api.get("/v1/tickets").json()["data"] == []


def test_the_teams_takeover_says_nobody_waits(h):
    """The session.updated of a team's first reply carries the session as it is: the team spoke last."""
    agent = h.agent("takeover", [text("Hi.")])
    session = h.session(agent)
    write(h.api, session, {"role": "team", "content": "Hello!", "author": "Ana"})
    [update] = SessionEvent.objects.filter(session_id=session, type="session.updated")
    assert update.data["status"] == "handed_off" and update.data["waiting_since"] is None


def test_a_purged_runs_messages_leave_the_conversations_stream(h):
    """A `store: false` run's messages are deleted once its result is read; their events go with them, so a stream
    never has to step over events it can't send."""
    agent = h.agent("purged", [text("Secret answer.")])
    session = h.session(agent)
    run = h.run(agent, "private question", session=session, store=False)
    assert run["status"] == "completed"
    assert not Message.objects.filter(session_id=session).exists()
    assert not SessionEvent.objects.filter(session_id=session, type="session.message.created").exists()


def test_a_sandbox_handoff_never_hands_over_a_customers_conversation(h):
    agent = h.agent(
        "sandboxed",
        [calls(("transfer_to_human", {"reason_type": "complaint", "summary": "x"})), text("The team has it.")],
        tools={"allow_anonymous_actions": True},
        publish=False,
    )
    session = h.session(agent)
    run = h.run(agent, "a person", session=session, sandbox={"run_real_actions": True})
    assert run["status"] == "completed"
    assert Session.objects.get(pk=session).status == "open"
