"""`GET /v1/agents/{id}/versions/{a}/diff/{b}`: what changed in the config and the HTTP tool definitions between two
versions, tool grants matched by name; restoring a version to the draft; someone else's agent as a 404."""

from __future__ import annotations

import pytest

from tests.kagent.test_auth import error
from tests.tools.test_http_tools_api import order_status

pytestmark = pytest.mark.django_db


def publish(api, agent, note=""):
    response = api.post(f"/v1/agents/{agent}/publish", {"note": note}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["number"]


def test_diff_of_config_and_tool_definitions(api):
    assert api.post("/v1/tools", order_status(), format="json").status_code == 201
    agent = api.post(
        "/v1/agents",
        {
            "name": "Support",
            "config": {"instructions": "Be kind.", "tools": {"client": [{"name": "get_cart", "description": "Cart."}]}},
        },
        format="json",
    ).json()["id"]
    publish(api, agent, "first")
    api.patch(
        f"/v1/agents/{agent}",
        {
            "config": {
                "instructions": "Be brief.",
                "tools": {"max_tool_rounds": 2, "http": [{"tool": "order_status", "rules": "Orders."}]},
            }
        },
        format="json",
    )
    api.patch("/v1/tools/order_status", {"description": "Where is my order?"}, format="json")
    publish(api, agent, "second")

    response = api.get(f"/v1/agents/{agent}/versions/1/diff/2")
    assert response.status_code == 200, response.json()
    diff = response.json()
    assert (diff["object"], diff["agent"], diff["from_version"], diff["to_version"]) == (
        "agent_version_diff",
        agent,
        1,
        2,
    )
    changes = {change["path"]: change for change in diff["changes"]}
    assert changes["$.config.instructions"] == {
        "path": "$.config.instructions",
        "change": "changed",
        "before": "Be kind.",
        "after": "Be brief.",
    }
    assert changes["$.config.tools.max_tool_rounds"]["before"] == 3
    assert changes["$.config.tools.http[order_status]"]["change"] == "added"
    assert changes["$.config.tools.http[order_status]"]["after"]["rules"] == "Orders."
    added_tool = changes["$.http_tools.order_status"]
    assert added_tool["change"] == "added" and added_tool["after"]["description"] == "Where is my order?"
    assert not any(path.startswith("$.config.tools.client") for path in changes)

    back = api.get(f"/v1/agents/{agent}/versions/2/diff/1").json()["changes"]
    assert {c["path"]: c["change"] for c in back}["$.config.tools.http[order_status]"] == "removed"
    assert api.get(f"/v1/agents/{agent}/versions/2/diff/2").json()["changes"] == []
    assert api.get(f"/v1/agents/{agent}/versions/1/diff/9").status_code == 404


def test_restore_a_version_to_the_draft(api):
    agent = api.post("/v1/agents", {"name": "S", "config": {"instructions": "One."}}, format="json").json()["id"]
    publish(api, agent)
    api.patch(f"/v1/agents/{agent}", {"config": {"instructions": "Two.", "variables": {"shop": "Acme"}}}, format="json")
    publish(api, agent)
    restored = api.post(f"/v1/agents/{agent}/versions/1/restore")
    assert restored.status_code == 200, restored.json()
    assert restored.json()["config"]["instructions"] == "One."
    assert restored.json()["config"]["variables"] == {}
    assert restored.json()["latest_version"] == 2  # the draft changed; nothing was published
    assert api.get(f"/v1/agents/{agent}/versions/2").json()["config"]["instructions"] == "Two."
    assert api.post(f"/v1/agents/{agent}/versions/7/restore").status_code == 404


def test_someone_elses_versions_are_404(api, bob):
    agent = api.post("/v1/agents", {"name": "S"}, format="json").json()["id"]
    publish(api, agent)
    publish(api, agent)
    other = bob.client()
    assert error(other.get(f"/v1/agents/{agent}/versions/1/diff/2")) == "not_found"
    assert other.post(f"/v1/agents/{agent}/versions/1/restore").status_code == 404
