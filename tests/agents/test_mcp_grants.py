"""Granting MCP tools in an agent's draft (`tools.mcp`, SPEC §6 "MCP servers"): the name the model sees, conflicts
across every kind of tool, listed tools that can't be granted, what publishing refuses, and a server its agents'
drafts still use."""

from __future__ import annotations

from typing import Any

import pytest

from kagent.models import SigningSecret
from kagent.secrets import signing_secrets_valid
from tests.examples import seed_order_status

pytestmark = pytest.mark.django_db

BASE = "https://tools.test:8443"
SCHEMA = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}


def listed(name: str, schema: Any = None) -> dict[str, Any]:
    return {"name": name, "description": "Look up an order.", "inputSchema": SCHEMA if schema is None else schema}


@pytest.fixture
def shop(alice, api, upstream, egress_settings) -> dict[str, Any]:
    upstream.secrets = signing_secrets_valid(project=alice.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(400)}}
    path = upstream.mcp.serve(
        "shop",
        tools=[listed("order_status"), listed("cancel_order"), listed("Bad-Name"), listed("bulk_export", huge)],
    )
    response = api.post("/v1/mcp_servers", {"name": "shop", "url": BASE + path}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def create_agent(api, tools: dict[str, Any]):
    return api.post("/v1/agents", {"name": "Support", "config": {"tools": tools}}, format="json")


def test_a_grant_is_filled_in_with_its_defaults(api, shop):
    response = create_agent(api, {"mcp": [{"server": "shop", "tool": "cancel_order"}]})
    assert response.status_code == 201, response.json()
    assert response.json()["config"]["tools"]["mcp"] == [
        {"server": "shop", "tool": "cancel_order", "enabled": True, "effect": "action",
         "requires_verified_user": False, "rules": ""}
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("tools", "code"),
    [
        ({"mcp": [{"server": "shop", "tool": "order_status"}] * 2}, "tool_name_conflict"),
        ({"mcp": [{"server": "shop", "tool": "transfer_to_human"}]}, "tool_name_conflict"),
        (
            {
                "mcp": [{"server": "shop", "tool": "order_status"}],
                "client": [{"name": "shop__order_status", "description": "The app's own."}],
            },
            "tool_name_conflict",
        ),
        ({"mcp": [{"server": "shop", "tool": "x" * 62}]}, "invalid_config"),  # 68 characters with the prefix
        ({"mcp": [{"server": "sh__op", "tool": "order_status"}]}, "invalid_config"),
        ({"mcp": [{"server": "shop", "tool": "Bad-Name"}]}, "invalid_config"),
        ({"mcp": [{"server": "shop", "tool": "order_status", "effect": "escalation"}]}, "invalid_config"),
        ({"mcp": [{"server": "shop", "tool": "order_status", "approval": "sometimes"}]}, "invalid_config"),
    ],
    ids=["twice", "builtin-name", "client-tool", "too-long", "separator", "name-rules", "effect", "unknown-key"],
)
def test_grants_that_cant_be_made_are_refused(api, shop, tools, code):
    response = create_agent(api, tools)
    assert response.status_code == 422, response.json()
    assert response.json()["error"]["code"] == code


def test_an_http_tool_of_the_same_name_conflicts(api, shop):
    tool = seed_order_status(name="shop__order_status")
    assert api.post("/v1/tools", tool, format="json").status_code == 201
    response = create_agent(
        api, {"http": [{"tool": "shop__order_status"}], "mcp": [{"server": "shop", "tool": "order_status"}]}
    )
    assert response.status_code == 422 and response.json()["error"]["code"] == "tool_name_conflict"


def test_a_listed_tool_that_cant_be_granted_is_refused_with_the_reason(api, shop):
    reasons = {t["name"]: t["reason"] for t in shop["tools"] if not t["grantable"]}
    assert set(reasons) == {"Bad-Name", "bulk_export"}
    response = create_agent(api, {"mcp": [{"server": "shop", "tool": "bulk_export"}]})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "tool_not_grantable"
    assert error["details"][0]["path"] == "$.tools.mcp[0]" and "bounds" in error["details"][0]["message"]
    # Through PATCH too; nothing was written.
    agent = create_agent(api, {}).json()
    patched = api.patch(
        f"/v1/agents/{agent['id']}",
        {"config": {"tools": {"mcp": [{"server": "shop", "tool": "bulk_export"}]}}},
        format="json",
    )
    assert patched.status_code == 422
    assert api.get(f"/v1/agents/{agent['id']}").json()["config"]["tools"]["mcp"] == []


def test_publishing_refuses_a_grant_of_a_server_or_tool_that_isnt_there(api, shop):
    agent = create_agent(api, {"mcp": [{"server": "crm", "tool": "lookup"}, {"server": "shop", "tool": "gone"}]})
    assert agent.status_code == 201  # a draft may grant what doesn't exist yet, like an HTTP tool
    response = api.post(f"/v1/agents/{agent.json()['id']}/publish", {}, format="json")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "unknown_tool"
    assert [d["path"] for d in error["details"]] == ["$.tools.mcp[0]", "$.tools.mcp[1]"]
    assert api.get(f"/v1/agents/{agent.json()['id']}/versions").json()["data"] == []


def test_a_server_granted_by_a_draft_cant_be_deleted_or_renamed(api, shop):
    agent = create_agent(api, {"mcp": [{"server": "shop", "tool": "order_status"}]}).json()
    for response in (
        api.delete(f"/v1/mcp_servers/{shop['id']}"),
        api.patch(f"/v1/mcp_servers/{shop['id']}", {"name": "store"}, format="json"),
    ):
        assert response.status_code == 409, response.json()
        assert response.json()["error"]["code"] == "tool_in_use"
        assert agent["id"] in response.json()["error"]["details"]["agents"]
    assert api.get(f"/v1/mcp_servers/{shop['id']}").json()["name"] == "shop"
    api.patch(f"/v1/agents/{agent['id']}", {"config": {"tools": {"mcp": []}}}, format="json")
    assert api.delete(f"/v1/mcp_servers/{shop['id']}").status_code == 200


def test_a_grant_whose_tool_stops_being_grantable_stays_until_publishing(api, shop, upstream):
    agent = create_agent(api, {"mcp": [{"server": "shop", "tool": "order_status"}]}).json()
    # The server now lists order_status with a schema outside the bounds (a keyword they don't allow).
    unbounded = {"type": "object", "properties": {"x": {"type": "string", "qux": 1}}}
    upstream.mcp.servers["shop"].tools = [listed("order_status", unbounded)]
    refreshed = api.post(f"/v1/mcp_servers/{shop['id']}/refresh").json()
    assert refreshed["tools"][0]["grantable"] is False
    # An unrelated edit of the draft is not refused for the grant made before…
    edited = api.patch(f"/v1/agents/{agent['id']}", {"config": {"instructions": "Be brief."}}, format="json")
    assert edited.status_code == 200, edited.json()
    # …but publishing it is, with the reason.
    published = api.post(f"/v1/agents/{agent['id']}/publish", {}, format="json")
    assert published.status_code == 422
    assert published.json()["error"]["code"] == "tool_not_grantable"
    assert "can't be granted" in published.json()["error"]["message"]


def test_a_version_diff_names_mcp_grants_as_the_model_sees_them():
    from agents.diff import json_diff

    before = {"mcp": [{"server": "shop", "tool": "lookup"}, {"server": "crm", "tool": "lookup", "rules": "a"}]}
    after = {
        "mcp": [
            {"server": "crm", "tool": "lookup", "rules": "b"},
            {"server": "billing", "tool": "lookup"},
            {"server": "shop", "tool": "lookup"},
        ]
    }
    changes = {(c.path, c.change) for c in json_diff(before, after, "$.config.tools")}
    assert changes == {
        ("$.config.tools.mcp[crm__lookup].rules", "changed"),
        ("$.config.tools.mcp[billing__lookup]", "added"),
    }


def test_a_draft_07_input_schema_is_read_as_2020_12_and_granted(api, shop, upstream):
    """What the official TypeScript SDK lists (zod converted with a draft-07 `$schema`, a tuple as an array
    `items`): grantable, and arguments are checked by its meaning."""
    draft_07 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "order": {"type": "string", "minLength": 1},
            "window": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False},
        },
        "required": ["order"],
        "additionalProperties": False,
    }
    upstream.mcp.servers["shop"].tools = [listed("order_status", draft_07)]
    [tool] = api.post(f"/v1/mcp_servers/{shop['id']}/refresh").json()["tools"]
    assert tool["grantable"] is True, tool["reason"]
    assert "$schema" not in tool["input_schema"]
    assert tool["input_schema"]["properties"]["window"] == {
        "type": "array",
        "prefixItems": [{"type": "string"}, {"type": "integer"}],
        "items": False,
    }
    assert create_agent(api, {"mcp": [{"server": "shop", "tool": "order_status"}]}).status_code == 201
