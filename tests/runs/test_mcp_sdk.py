"""K-Agent's MCP client against the official MCP Python SDK's server (fakes/sdk_mcp.py: the reference
implementation, Streamable HTTP over TLS on loopback), end to end: the business registers it, its tools are listed
(pydantic's schemas, grantable), an agent grants two, and a run calls them through the policy check, signed, with
the structured result shown as data and the tool's own failure as a neutral code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from fakes.llm import calls, text
from fakes.sdk_mcp import SdkServer, free_loopback
from kagent.models import SigningSecret
from kagent.secrets import signing_secrets_valid
from tests.runs.conftest import VERIFIED, Harness

pytestmark = pytest.mark.django_db

NAME = "sdk.test"


@pytest.fixture(scope="module")
def sdk_server(cert_dir: Path) -> Iterator[SdkServer]:
    host = free_loopback(8443, ("127.0.0.3", "127.0.0.4", "127.0.0.5"))
    server = SdkServer(host=host, port=8443).start(
        name=NAME, certfile=str(cert_dir / "server.pem"), keyfile=str(cert_dir / "server.key")
    )
    yield server
    server.stop()


@pytest.fixture
def sdk(sdk_server: SdkServer, egress_settings: Any) -> SdkServer:
    egress_settings.KAGENT_EGRESS_ALLOW_NETWORKS = [
        *egress_settings.KAGENT_EGRESS_ALLOW_NETWORKS,
        f"{sdk_server.host}/32",
    ]
    egress_settings.KAGENT_EGRESS_RESOLVE += f" {NAME}:8443:{sdk_server.host}"
    sdk_server.received.clear()
    return sdk_server


def test_the_sdks_server_is_listed_granted_and_called_through_the_policy(h: Harness, sdk: SdkServer):
    response = h.api.post("/v1/mcp_servers", {"name": "shop", "url": f"https://{NAME}:8443/mcp"}, format="json")
    assert response.status_code == 201, response.json()
    server = response.json()
    tools = {tool["name"]: tool for tool in server["tools"]}
    assert set(tools) == {"order_status", "cancel_order", "refund"}
    assert all(tool["grantable"] for tool in tools.values()), [t["reason"] for t in tools.values()]
    assert tools["order_status"]["input_schema"]["required"] == ["order"]
    assert server["protocol_version"] == "2025-11-25"

    agent = h.agent(
        "sdk",
        [
            calls(("shop__order_status", {"order": "8812"}), ("shop__refund", {"order": "8812", "amount": 20})),
            calls(("shop__order_status", {"order": "8812", "coupon": "FREE"})),
            text("Order 8812 has shipped and arrives Tuesday; a person will look at the refund."),
        ],
        tools={
            "mcp": [
                {"server": "shop", "tool": "order_status", "effect": "read"},
                {"server": "shop", "tool": "refund", "effect": "action"},
            ]
        },
    )
    run = h.run(agent, "where is 8812, and refund it?", allow_actions=True, **VERIFIED)
    assert run["status"] == "completed", run
    status, refund, extra = h.tool_steps(run["id"])
    assert status["status"] == "succeeded"
    shown = status["shown_to_model"]["data"]
    assert shown["structured"] == {"order": "8812", "status": "shipped", "eta": "Tuesday"}
    assert "text" not in shown  # the SDK's text part only repeats the structured content
    assert refund["status"] == "failed" and refund["shown_to_model"]["error"]["code"] == "upstream_failed"
    assert refund["upstream"]["error_code"] == "mcp_tool_error" and "manager" in refund["upstream"]["body_excerpt"]
    assert extra["policy"]["code"] == "invalid_arguments"  # coupon: not in the copied schema, never sent

    # Every request the SDK received was signed with the project's tool signing secret; each call under its own id.
    secrets = signing_secrets_valid(project=h.tenant.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    for request in sdk.received:
        if request.method == "POST":
            Webhook(secrets[0]).verify(request.body, request.headers)  # raises if not
    call_ids = [
        r.headers["webhook-id"]
        for r in sdk.received
        if r.method == "POST" and json.loads(r.body).get("method") == "tools/call"
    ]
    assert call_ids == [status["call_id"], refund["call_id"]]
    assert all(r.headers["user-agent"] == "K-Agent/1" for r in sdk.received)
