"""The desk (tickets, handoffs) and knowledge sources over the API, and search_knowledge reading them."""

from __future__ import annotations

import json

import pytest

from fakes.llm import calls, text
from tests.kagent.test_auth import error
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


def test_knowledge_sources_and_arabic_aware_search(h, bob):
    agent = h.agent("kb", [calls(("search_knowledge", {"query": "سياسة الإرجاع"})), text("30 days.")])
    created = h.api.post(
        "/v1/knowledge_sources", {"title": "سياسه الارجاع", "content": "يمكن الإرجاع خلال ٣٠ يوما"}, format="json"
    )
    assert created.status_code == 201, created.json()
    h.api.post(
        "/v1/knowledge_sources", {"title": "Shipping", "content": "We ship in 2 days", "agent": agent}, format="json"
    )
    assert (
        h.api.post("/v1/knowledge_sources", {"title": "x", "content": "y", "kind": "api"}, format="json").status_code
        == 422
    )
    assert h.api.post("/v1/knowledge_sources", {"title": "", "content": "y"}, format="json").status_code == 422
    assert len(h.api.get("/v1/knowledge_sources").json()["data"]) == 2
    assert bob.client().get(f"/v1/knowledge_sources/{created.json()['id']}").status_code == 404
    assert (
        bob.client()
        .post("/v1/knowledge_sources", {"title": "x", "content": "y", "agent": agent}, format="json")
        .status_code
        == 404
    )

    run = h.run(agent, "ما هي سياسة الإرجاع؟")
    assert run["status"] == "completed"
    assert "search_knowledge" in h.fake.requests("kb")[0].tool_names  # offered: searchable sources exist
    result = json.loads(h.fake.requests("kb")[1].new_tool_results[0]["content"])
    assert result["ok"] is True
    assert [r["title"] for r in result["data"]["results"]] == ["سياسه الارجاع"]  # alef/taa-marbuta forms unified
    assert result["data"]["results"][0] == {
        "title": "سياسه الارجاع",
        "passage": "يمكن الإرجاع خلال ٣٠ يوما",
        "source": created.json()["id"],
    }
    assert "notice" in result["data"] and result["data"]["tool"] == "search_knowledge"


def test_search_knowledge_not_offered_without_sources(h):
    agent = h.agent("no-kb", [text("hi")])
    h.run(agent)
    assert "search_knowledge" not in h.fake.last_request("no-kb").tool_names


def test_knowledge_delete(h):
    source = h.api.post("/v1/knowledge_sources", {"title": "t", "content": "c"}, format="json").json()
    assert h.api.delete(f"/v1/knowledge_sources/{source['id']}").json()["deleted"] is True
    response = h.api.get(f"/v1/knowledge_sources/{source['id']}")
    assert response.status_code == 404 and error(response) == "not_found"
