"""Knowledge sources over the API, and search_knowledge reading them in a run (Arabic-aware)."""

from __future__ import annotations

import json

import pytest

from fakes.llm import calls, text
from tests.kagent.test_auth import error

pytestmark = pytest.mark.django_db


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
