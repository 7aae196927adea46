"""Issue 39, finding 1: an MCP tool takes the customer's identity from the credential, never from the model.
Identity-named parameters are refused on a grant that needs a verified user (as on HTTP tools: same names, same
code); the verified end user reaches the server inside the signed request (`params._meta["k-agent/end_user"]`);
every object of a listed schema is closed before the model sees it and the arguments are checked against it; a
tool whose schema leaves objects open is not grantable, and says why. Against the real MCP server on loopback TLS
(fakes/mcp.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes.llm import calls, text
from tests.runs.conftest import VERIFIED
from tests.runs.test_mcp_tools import ORDER_SCHEMA, add_server, listed, tool_calls

pytestmark = pytest.mark.django_db

BY_EMAIL = {
    "type": "object",
    "properties": {"email": {"type": "string", "maxLength": 100}, "order": {"type": "string", "maxLength": 20}},
    "required": ["order"],
    "additionalProperties": False,
}
OPEN = {"type": "object", "properties": {"order": {"type": "string"}}, "additionalProperties": True}
NESTED = {
    "type": "object",
    "properties": {"filter": {"type": "object", "properties": {"status": {"type": "string", "maxLength": 20}}}},
    "additionalProperties": False,
}


def grant(h: Any, **fields: Any) -> Any:
    agent = h.api.post("/v1/agents", {"name": "mcp-identity"}, format="json").json()["id"]
    body = {"config": {"tools": {"mcp": [{"server": "shop", "effect": "read", **fields}]}}}
    return h.api.patch(f"/v1/agents/{agent}", body, format="json")


def test_an_identity_named_parameter_is_refused_on_a_grant_that_needs_a_verified_user(h, upstream, egress_settings):
    add_server(h, upstream, [listed("orders_by_email", schema=BY_EMAIL)])

    refused = grant(h, tool="orders_by_email", requires_verified_user=True)

    assert refused.status_code == 422, refused.json()
    error = refused.json()["error"]
    assert error["code"] == "identity_as_parameter"
    assert "email looks like identity" in error["message"] and "never from the model" in error["message"]
    assert error["details"][0]["path"] == "$.tools.mcp[0]"
    # Without the verified-user requirement the tool is the business's to grant (nobody's identity is at stake).
    assert grant(h, tool="orders_by_email").status_code == 200


def test_a_listed_tool_that_leaves_its_objects_open_is_not_grantable_and_says_why(h, upstream, egress_settings):
    server = add_server(h, upstream, [listed("open_lookup", schema=OPEN)])

    [tool] = server["tools"]
    assert tool["grantable"] is False
    assert "additionalProperties" in tool["reason"] and "strict" in tool["reason"]
    refused = grant(h, tool="open_lookup")
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "tool_not_grantable"


def test_nested_objects_are_closed_for_the_model_and_an_added_argument_is_refused_unsent(h, upstream, egress_settings):
    add_server(h, upstream, [listed("find_orders", schema=NESTED)])
    agent = h.agent(
        "mcp-nested",
        [
            calls(("shop__find_orders", {"filter": {"status": "open", "customer_id": "victim-7"}})),
            text("I couldn't look that up."),
        ],
        tools={"mcp": [{"server": "shop", "tool": "find_orders", "effect": "read"}]},
    )
    run = h.run(agent, "my open orders?", **VERIFIED)

    offered = {t["function"]["name"]: t["function"] for t in h.fake.requests("mcp-nested")[0].body["tools"]}
    assert offered["shop__find_orders"]["parameters"]["properties"]["filter"]["additionalProperties"] is False
    [call] = h.tool_steps(run["id"])
    assert call["policy"]["decision"] == "refused" and call["policy"]["code"] == "invalid_arguments"
    assert tool_calls(upstream) == []  # nothing reached the server


def test_the_verified_end_user_reaches_the_server_inside_the_signed_call_and_nobody_when_anonymous(
    h, upstream, egress_settings
):
    add_server(h, upstream, [listed("order_status", schema=ORDER_SCHEMA)])
    agent = h.agent(
        "mcp-who",
        [calls(("shop__order_status", {"order": "8812"})), text("Here is what the system says about 8812.")],
        tools={"mcp": [{"server": "shop", "tool": "order_status", "effect": "read", "requires_verified_user": True}]},
    )
    run = h.run(agent, "where is 8812?", **VERIFIED)
    assert run["status"] == "completed", run

    [sent] = tool_calls(upstream)
    assert sent["params"]["_meta"] == {"k-agent/end_user": {"external_id": "cust-42", "traits": {"tier": "gold"}}}
    assert sent["params"]["arguments"] == {"order": "8812"}
    [posted] = [r for r in upstream.received if r.method == "POST" and json.loads(r.body).get("method") == "tools/call"]
    assert posted.signature_valid and all(posted.signature_valid)  # the identity is inside what is signed
