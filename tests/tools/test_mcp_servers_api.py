"""`/v1/mcp_servers`: a business's MCP servers, listed through the hardened client against a real MCP server on
loopback TLS (fakes/mcp.py): what is listed and stored, which tools can't be granted and why, secrets in headers,
refused destinations, refreshes that fail, bad input, and someone else's project."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.upstream import Upstream
from kagent.models import EgressEvent, SigningSecret
from kagent.secrets import signing_secrets_valid
from tools.models import McpServer

pytestmark = pytest.mark.django_db

BASE = "https://tools.test:8443"
SCHEMA = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}
TOKEN = "mcp_tok_0123456789abcdef"


def listed(name: str, description: str = "Look up an order.", schema: Any = None) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": SCHEMA if schema is None else schema}


def exploding_schema() -> dict[str, Any]:
    # Each definition refers to the one before twice: 2^20 paths from a schema of a few hundred bytes.
    defs: dict[str, Any] = {"d0": {"type": "string"}}
    for i in range(1, 21):
        defs[f"d{i}"] = {"type": "array", "items": {"anyOf": [{"$ref": f"#/$defs/d{i - 1}"}] * 2}}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d20"}}, "$defs": defs}


@pytest.fixture
def signed(alice, upstream: Upstream) -> Upstream:
    """The fake verifies with alice's own tool signing secrets."""
    upstream.secrets = signing_secrets_valid(project=alice.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    return upstream


def put_secret(api, host: str = "tools.test") -> None:
    response = api.put("/v1/secrets/MCP_TOKEN", {"value": TOKEN, "allowed_hosts": [host]}, format="json")
    assert response.status_code in (200, 201), response.json()


def create(api, path: str, **fields: Any):
    body = {"name": "shop", "url": BASE + path, **fields}
    return api.post("/v1/mcp_servers", body, format="json")


def test_create_lists_and_stores_the_tools(api, egress_settings, signed):
    path = signed.mcp.serve("shop", tools=[listed("order_status"), listed("cancel_order")])
    response = create(api, path)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["id"].startswith("mcp_") and body["object"] == "mcp_server"
    assert body["name"] == "shop" and body["url"] == BASE + path and body["headers"] == {}
    assert body["tools"] == [
        {
            "name": "order_status",
            "description": "Look up an order.",
            "input_schema": SCHEMA,
            "grantable": True,
            "reason": None,
        },
        {
            "name": "cancel_order",
            "description": "Look up an order.",
            "input_schema": SCHEMA,
            "grantable": True,
            "reason": None,
        },
    ]
    assert body["truncated"] is False and body["last_error"] is None and body["listed_at"] is not None
    assert api.get(f"/v1/mcp_servers/{body['id']}").json() == body
    assert [s["id"] for s in api.get("/v1/mcp_servers").json()["data"]] == [body["id"]]
    # Signed with the project's tool signing secret, in the egress log as "mcp".
    assert all(r.signature_valid and all(r.signature_valid) for r in signed.received)
    assert {e.purpose for e in EgressEvent.objects.all()} == {"mcp"}


def test_tools_that_cant_be_granted_are_shown_with_the_reason_and_the_rest_stand(api, egress_settings, signed):
    path = signed.mcp.serve(
        "shop",
        tools=[
            listed("order_status"),
            listed("transfer_to_human"),
            listed("x" * 70),
            listed("Look-Up"),
            listed("explode", schema=exploding_schema()),
        ],
    )
    response = create(api, path)
    assert response.status_code == 201, response.json()
    tools = {t["name"]: t for t in response.json()["tools"]}
    assert tools["order_status"]["grantable"] is True
    assert tools["transfer_to_human"]["grantable"] is False
    assert "built-in" in tools["transfer_to_human"]["reason"]
    assert tools["x" * 70]["grantable"] is False and "tool-name rules" in tools["x" * 70]["reason"]
    assert tools["Look-Up"]["grantable"] is False and "tool-name rules" in tools["Look-Up"]["reason"]
    assert tools["explode"]["grantable"] is False and "tenant schemas" in tools["explode"]["reason"]


def test_secrets_in_headers_reach_the_server_and_are_never_shown(api, egress_settings, signed):
    put_secret(api)
    path = signed.mcp.serve("shop", tools=[listed("echo", description=f"Echoes {TOKEN} back.")])
    response = create(api, path, headers={"Authorization": "Bearer {{secret.MCP_TOKEN}}"})
    assert response.status_code == 201, response.json()
    assert {r.headers["authorization"] for r in signed.received} == {f"Bearer {TOKEN}"}
    assert TOKEN not in response.content.decode()
    assert response.json()["headers"] == {"Authorization": "Bearer {{secret.MCP_TOKEN}}"}
    assert TOKEN not in str(list(EgressEvent.objects.values()))
    assert TOKEN not in str(list(McpServer.objects.values()))


def test_a_secret_not_allowed_for_the_host_is_refused(api, egress_settings, signed):
    put_secret(api, host="api.example.com")
    path = signed.mcp.serve("shop", tools=[listed("order_status")])
    response = create(api, path, headers={"Authorization": "Bearer {{secret.MCP_TOKEN}}"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "secret_host_not_allowed"
    assert signed.received == [] and not McpServer.objects.exists()


def test_a_server_at_a_denied_address_is_refused_and_never_reached(api, egress_settings, upstream, internal):
    response = api.post("/v1/mcp_servers", {"name": "inside", "url": "https://internal.test:8443/mcp"}, format="json")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "mcp_unreachable"
    assert error["details"]["code"] == "address_not_allowed"
    assert "127.0.0.1" not in response.content.decode()
    assert not McpServer.objects.exists()
    # (the `internal` fixture asserts it received nothing)


def test_a_server_that_cant_be_listed_is_refused_and_nothing_is_written(api, egress_settings, signed):
    response = create(api, "/mcp/nobody")  # the fake answers 404
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "mcp_unreachable"
    assert response.json()["error"]["details"]["code"] == "upstream_status"
    assert not McpServer.objects.exists()


def test_refresh_keeps_the_old_listing_on_error_and_records_it(api, egress_settings, signed):
    path = signed.mcp.serve("shop", tools=[listed("order_status")])
    created = create(api, path).json()
    signed.mcp.reset()  # the server is gone: 404
    response = api.post(f"/v1/mcp_servers/{created['id']}/refresh")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["tools"] == created["tools"] and body["listed_at"] == created["listed_at"]
    assert body["last_error"]["code"] == "upstream_status" and body["last_error"]["message"]
    # Back again with another tool: the listing is replaced and the error cleared.
    signed.mcp.serve("shop", tools=[listed("order_status"), listed("refund")])
    body = api.post(f"/v1/mcp_servers/{created['id']}/refresh").json()
    assert [t["name"] for t in body["tools"]] == ["order_status", "refund"]
    assert body["last_error"] is None


def test_update_lists_again_and_delete(api, egress_settings, signed):
    path = signed.mcp.serve("shop", tools=[listed("order_status")])
    created = create(api, path).json()
    other = signed.mcp.serve("other", tools=[listed("refund")])
    response = api.patch(f"/v1/mcp_servers/{created['id']}", {"name": "store", "url": BASE + other}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["name"] == "store" and [t["name"] for t in response.json()["tools"]] == ["refund"]
    # An update that can't be listed changes nothing.
    response = api.patch(f"/v1/mcp_servers/{created['id']}", {"url": BASE + "/mcp/nobody"}, format="json")
    assert response.status_code == 422 and response.json()["error"]["code"] == "mcp_unreachable"
    assert McpServer.objects.get().url == BASE + other
    response = api.delete(f"/v1/mcp_servers/{created['id']}")
    assert response.status_code == 200 and response.json()["deleted"] is True
    assert not McpServer.objects.exists()


def test_a_name_taken_by_another_server_is_a_conflict(api, egress_settings, signed):
    path = signed.mcp.serve("shop", tools=[listed("order_status")])
    assert create(api, path).status_code == 201
    response = create(api, path)
    assert response.status_code == 409 and response.json()["error"]["code"] == "tool_name_conflict"
    assert McpServer.objects.count() == 1


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"name": "Shop"}, "invalid_mcp_server_name"),
        ({"name": "a" * 21}, "invalid_mcp_server_name"),
        ({"name": "my__shop"}, "invalid_mcp_server_name"),
        ({"name": "shop_"}, "invalid_mcp_server_name"),
        ({"url": "http://tools.test:8443/mcp/shop"}, "invalid_url"),
        ({"url": "https://tools.test:9000/mcp/shop"}, "invalid_url"),
        ({"url": "https://10.0.0.5/mcp"}, "invalid_url"),
        ({"url": "https://tools.test:8443/mcp/{{var.shop}}"}, "placeholder_position"),
        ({"headers": {"Host": "evil.test"}}, "forbidden_header"),
        ({"headers": {"Mcp-Session-Id": "x"}}, "forbidden_header"),
        ({"headers": {"X-Who": "{{end_user.external_id}}"}}, "placeholder_position"),
        ({"headers": {"X-Bad": "a\nb"}}, "invalid_header"),
        ({"extra": 1}, "invalid_mcp_server"),
    ],
)
def test_bad_input_is_refused_with_its_code(api, egress_settings, signed, fields, code):
    path = signed.mcp.serve("shop", tools=[listed("order_status")])
    response = create(api, path, **fields)
    assert response.status_code == 422, response.json()
    assert response.json()["error"]["code"] == code
    assert signed.received == [] and not McpServer.objects.exists()


def test_someone_elses_server_is_a_404(api, bob, egress_settings, signed):
    path = signed.mcp.serve("shop", tools=[listed("order_status")])
    server_id = create(api, path).json()["id"]
    theirs = bob.client()
    assert theirs.get(f"/v1/mcp_servers/{server_id}").status_code == 404
    assert theirs.patch(f"/v1/mcp_servers/{server_id}", {"name": "mine"}, format="json").status_code == 404
    assert theirs.post(f"/v1/mcp_servers/{server_id}/refresh").status_code == 404
    assert theirs.delete(f"/v1/mcp_servers/{server_id}").status_code == 404
    assert theirs.get("/v1/mcp_servers").json()["data"] == []
    assert McpServer.objects.get().name == "shop"
