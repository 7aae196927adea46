"""The desk (tickets, handoffs) over the API: what runs made, test-panel objects only when asked for, closing a
ticket, and someone else's desk."""

from __future__ import annotations

import pytest

from fakes.llm import calls, text
from tests.runs.conftest import VERIFIED

pytestmark = pytest.mark.django_db


def test_tickets_and_handoffs_on_the_desk_without_test_panel_ones(h):
    turns = [
        calls(
            ("create_ticket", {"title": "Damaged", "description": "Crushed box", "priority": "urgent"}),
            ("transfer_to_human", {"reason_type": "liability", "summary": "Damage claim"}),
        ),
        text("Ticket TKT-1 is open and the team has the conversation."),
    ]
    agent = h.agent("desk", turns, tools={"builtin": {"create_ticket": {"enabled": True}}})
    h.run(agent, "box crushed", allow_actions=True, **VERIFIED)
    h.fake.script("desk", turns)
    h.api.patch(f"/v1/agents/{agent}", {"config": {"instructions": "draft"}}, format="json")
    h.run(
        agent,
        "box crushed",
        sandbox=True,
        run_real_actions=True,
        allow_actions=True,
        end_user={"external_id": "tester"},
    )

    tickets = h.api.get("/v1/tickets").json()["data"]
    assert [(t["number"], t["priority"], t["end_user"], t["is_test"]) for t in tickets] == [
        ("TKT-1", "urgent", "cust-42", False)
    ]
    assert len(h.api.get("/v1/tickets?include_tests=true").json()["data"]) == 2
    handoffs = h.api.get("/v1/handoffs").json()["data"]
    assert [(x["reason_type"], x["summary"], x["is_test"]) for x in handoffs] == [("liability", "Damage claim", False)]

    ticket = tickets[0]
    closed = h.api.patch(f"/v1/tickets/{ticket['id']}", {"status": "closed"}, format="json").json()
    assert closed["status"] == "closed"
    assert h.api.get("/v1/tickets?status=open").json()["data"] == []
    bad = h.api.patch(f"/v1/tickets/{ticket['id']}", {"title": "rewritten"}, format="json")
    assert bad.status_code == 422
    assert h.api.get("/v1/tickets?status=maybe").status_code == 422


def test_someone_elses_desk_is_404(h, bob):
    agent = h.agent(
        "desk2",
        [calls(("create_ticket", {"title": "t", "description": "d"})), text("TKT-1 open.")],
        tools={"builtin": {"create_ticket": {"enabled": True}}},
    )
    h.run(agent, allow_actions=True, **VERIFIED)
    ticket = h.api.get("/v1/tickets").json()["data"][0]["id"]
    other = bob.client()
    assert other.get(f"/v1/tickets/{ticket}").status_code == 404
    assert other.patch(f"/v1/tickets/{ticket}", {"status": "closed"}, format="json").status_code == 404
    assert other.get("/v1/tickets").json()["data"] == []
    assert other.get("/v1/handoffs").json()["data"] == []
