"""The desk's lifecycle: a session shows `status` (open, handed_off, closed) and `flagged`; transfer_to_human hands
it off; closing its handoff (with who has it) closes it; the customer writing again opens it; tickets close and
reopen under the one-open-ticket-per-customer rule; test objects only with include_tests; each change that the
business can subscribe to is recorded for its webhooks in the same transaction."""

from __future__ import annotations

import pytest

from conversations.models import Session
from desk.models import Ticket
from fakes.llm import calls, text
from hooks.models import WebhookEvent
from tests.runs.conftest import VERIFIED

pytestmark = pytest.mark.django_db

HANDOFF_TURNS = [
    calls(
        ("transfer_to_human", {"reason_type": "liability", "summary": "Damage claim"}),
        ("flag_conversation", {"reason": "angry about a damaged box", "urgency": "high"}),
    ),
    text("A person from the team will continue here."),
]
TICKET_TOOLS = {"builtin": {"create_ticket": {"enabled": True}}}
FLAG_TOOLS = {"builtin": {"flag_conversation": {"enabled": True}}}


def handed_off_session(h, script="handoff"):
    agent = h.agent(script, HANDOFF_TURNS, tools=FLAG_TOOLS)
    session = h.session(agent, **VERIFIED)
    run = h.run(agent, "my box was crushed, I want a person", session=session)
    assert run["status"] == "completed"
    return agent, session


def test_a_handoff_hands_the_session_off_and_closing_it_closes_the_session(h):
    agent, session = handed_off_session(h)
    shown = h.api.get(f"/v1/sessions/{session}").json()
    assert (shown["status"], shown["flagged"]) == ("handed_off", True)
    needs_a_person = h.api.get("/v1/sessions?status=handed_off&flagged=true").json()["data"]
    assert [s["id"] for s in needs_a_person] == [session]
    assert h.api.get("/v1/sessions?status=open").json()["data"] == []

    [handoff] = h.api.get("/v1/handoffs").json()["data"]
    assert (handoff["status"], handoff["assignee"], handoff["closed_at"]) == ("open", None, None)
    taken = h.api.patch(f"/v1/handoffs/{handoff['id']}", {"assignee": "  Mona  <mona@shop.example> "}, format="json")
    assert taken.status_code == 200 and taken.json()["assignee"] == "Mona <mona@shop.example>"
    assert h.api.get(f"/v1/sessions/{session}").json()["status"] == "handed_off"

    closed = h.api.patch(f"/v1/handoffs/{handoff['id']}", {"status": "closed"}, format="json").json()
    assert closed["status"] == "closed" and closed["closed_at"] is not None
    assert closed["assignee"] == "Mona <mona@shop.example>"
    assert h.api.get(f"/v1/sessions/{session}").json()["status"] == "closed"
    assert [s["id"] for s in h.api.get("/v1/sessions?status=closed").json()["data"]] == [session]
    assert h.api.get("/v1/handoffs?status=open").json()["data"] == []

    reopened = h.api.patch(f"/v1/handoffs/{handoff['id']}", {"status": "open"}, format="json").json()
    assert reopened["status"] == "open" and reopened["closed_at"] is None
    assert h.api.get(f"/v1/sessions/{session}").json()["status"] == "handed_off"
    h.api.patch(f"/v1/handoffs/{handoff['id']}", {"status": "closed", "assignee": None}, format="json")

    # The customer writes again: the conversation is open again.
    h.fake.script("handoff", [text("Welcome back.")])
    h.run(agent, "one more question", session=session)
    assert h.api.get(f"/v1/sessions/{session}").json()["status"] == "open"


def test_the_agent_keeps_quiet_while_the_team_holds_the_conversation(h):
    agent, session = handed_off_session(h, "still-handed-off")
    h.fake.script("still-handed-off", [text("The bot again.")])
    refused = h.api.post("/v1/runs", {"agent": agent, "input": "hello?", "session": session}, format="json")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "session_handed_off"
    assert h.api.get(f"/v1/sessions/{session}").json()["status"] == "handed_off"
    assert [m["content"] for m in h.api.get(f"/v1/sessions/{session}/messages").json()["data"]][0] != "hello?"


def test_handoff_changes_are_checked(h):
    handed_off_session(h, "checked")
    handoff = h.api.get("/v1/handoffs").json()["data"][0]["id"]
    for body, code in (
        ({"assignee": "x" * 201}, "invalid_request"),
        ({"status": "resolved"}, "invalid_request"),
        ({"assignee": 42}, "invalid_request"),
        ({"summary": "rewritten"}, "invalid_request"),
    ):
        response = h.api.patch(f"/v1/handoffs/{handoff}", body, format="json")
        assert response.status_code == 422, body
        assert response.json()["error"]["code"] == code
    assert h.api.get(f"/v1/handoffs/{handoff}").json()["assignee"] is None


def test_reopening_a_ticket_keeps_one_open_ticket_per_customer(h):
    agent = h.agent(
        "tickets",
        [calls(("create_ticket", {"title": "Damaged", "description": "Crushed box"})), text("TKT-1 is open.")],
        tools=TICKET_TOOLS,
    )
    h.run(agent, "crushed", allow_actions=True, **VERIFIED)
    [first] = h.api.get("/v1/tickets").json()["data"]
    closed = h.api.patch(f"/v1/tickets/{first['id']}", {"status": "closed"}, format="json").json()
    assert closed["status"] == "closed" and closed["closed_at"] is not None

    # Closed, the customer may open another one; then the first can't be reopened beside it.
    h.fake.script("tickets", [calls(("create_ticket", {"title": "Late", "description": "Still late"})), text("TKT-2.")])
    h.run(agent, "late too", allow_actions=True, **VERIFIED)
    second = next(t for t in h.api.get("/v1/tickets").json()["data"] if t["number"] == "TKT-2")
    refused = h.api.patch(f"/v1/tickets/{first['id']}", {"status": "open"}, format="json")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "ticket_already_open"
    assert "TKT-2" in refused.json()["error"]["message"]
    assert Ticket.objects.get(pk=first["id"]).status == "closed"

    h.api.patch(f"/v1/tickets/{second['id']}", {"status": "closed"}, format="json")
    reopened = h.api.patch(f"/v1/tickets/{first['id']}", {"status": "open"}, format="json").json()
    assert reopened["status"] == "open" and reopened["closed_at"] is None
    # Another customer's open ticket doesn't count.
    Ticket.objects.create(project=h.tenant.project, number=9, title="t", description="d", rate_key="eu:someone-else")
    h.api.patch(f"/v1/tickets/{first['id']}", {"status": "closed"}, format="json")
    assert h.api.patch(f"/v1/tickets/{first['id']}", {"status": "open"}, format="json").status_code == 200


def test_test_panel_objects_stay_off_the_default_views(h):
    agent = h.agent("panel", HANDOFF_TURNS, tools=FLAG_TOOLS, publish=False)
    session = h.session(agent)
    Session.objects.filter(pk=session).update(is_test=True)
    h.run(agent, "test", session=session, sandbox=True)
    assert h.api.get("/v1/sessions").json()["data"] == []
    assert h.api.get("/v1/handoffs").json()["data"] == []
    assert [s["status"] for s in h.api.get("/v1/sessions?include_tests=true").json()["data"]] == ["handed_off"]
    assert len(h.api.get("/v1/handoffs?include_tests=true").json()["data"]) == 1
    assert WebhookEvent.objects.count() == 0


def test_desk_changes_are_recorded_for_webhooks_with_what_they_report(h):
    h.api.post(
        "/v1/webhook_endpoints",
        {
            "url": "https://hooks.shop.example/k",
            "event_types": ["handoff.created", "handoff.closed", "conversation.flagged", "ticket.updated"],
        },
        format="json",
    )
    _, session = handed_off_session(h, "recorded")
    handoff = h.api.get("/v1/handoffs").json()["data"][0]
    h.api.patch(f"/v1/handoffs/{handoff['id']}", {"assignee": "Mona"}, format="json")  # not an event of its own
    h.api.patch(f"/v1/handoffs/{handoff['id']}", {"status": "closed"}, format="json")
    events = list(WebhookEvent.objects.order_by("created_at", "pk"))
    assert sorted(e.type for e in events) == ["conversation.flagged", "handoff.closed", "handoff.created"]
    by_type = {e.type: e for e in events}
    assert by_type["handoff.created"].data["status"] == "open"
    assert by_type["handoff.closed"].data == h.api.get(f"/v1/handoffs/{handoff['id']}").json()
    assert by_type["conversation.flagged"].data["id"] == session
    assert by_type["conversation.flagged"].data["flagged"] is True


def test_someone_elses_handoffs_are_404(h, bob):
    handed_off_session(h, "theirs")
    handoff = h.api.get("/v1/handoffs").json()["data"][0]["id"]
    other = bob.client()
    assert other.get(f"/v1/handoffs/{handoff}").status_code == 404
    assert other.patch(f"/v1/handoffs/{handoff}", {"status": "closed"}, format="json").status_code == 404
    assert other.get("/v1/sessions?status=handed_off").json()["data"] == []
    assert h.api.get(f"/v1/handoffs/{handoff}").json()["status"] == "open"
