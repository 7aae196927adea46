"""One business's project with an object of every kind (issue #12's proofs): the tenant sweep and the fuzzer read,
change and delete them with another project's keys."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import jwt
import pytest

from checks.models import Check, CheckRun
from fakes.llm import calls, text
from hooks import deliveries as hook_deliveries
from hooks.models import WebhookDelivery, WebhookEvent
from kagent.models import EgressEvent
from llm import retry
from runs import engine
from tests.conftest import Tenant
from tests.examples import seed_order_status
from tools.models import McpServer

SECRET_NAME = "ALICE_ORDERS_TOKEN"
SECRET_VALUE = "alice-very-private-token-9f3c"
TOOL_NAME = "alice_order_status"
CART = {
    "name": "get_cart",
    "description": "Returns the items in the cart.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    "effect": "read",
}


@dataclass
class World:
    """Alice's objects, by kind; `markers` is every id and secret of hers that must never reach another project."""

    tenant: Tenant
    agent: str
    tool: str
    secret: str
    session: str
    end_user: str
    end_user_token: str
    paused_run: str
    call_id: str
    done_run: str
    ticket: str
    handoff: str
    source: str
    egress_event: str
    tool_signing_secret: str
    end_user_secret: str
    endpoint: str
    delivery: str
    endpoint_secret: str
    mcp_server: str
    check: str
    check_run: str

    @property
    def markers(self) -> list[str]:
        return [
            self.agent,
            self.session,
            self.paused_run,
            self.call_id,
            self.done_run,
            self.ticket,
            self.handoff,
            self.source,
            self.egress_event,
            SECRET_VALUE,
            SECRET_VALUE[-4:] + '"',
            self.tool_signing_secret,
            self.end_user_secret,
            self.endpoint,
            self.delivery,
            self.endpoint_secret,
            self.mcp_server,
            self.check,
            self.check_run,
            TOOL_NAME,
            SECRET_NAME,
            self.end_user,
        ]


def _ok(response: Any, status: int = 201) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
def world(alice: Tenant, fake_llm: Any, monkeypatch: Any) -> World:
    monkeypatch.setattr(retry, "SLEEP", lambda seconds: None)
    api = alice.client()
    _ok(
        api.put(
            f"/v1/secrets/{SECRET_NAME}", {"value": SECRET_VALUE, "allowed_hosts": ["api.example.com"]}, format="json"
        )
    )
    tool = seed_order_status(name=TOOL_NAME)
    tool["config"]["headers"] = {"Authorization": "Bearer {{secret." + SECRET_NAME + "}}"}
    _ok(api.post("/v1/tools", tool, format="json"))
    fake_llm.script(
        "alice-desk",
        [
            calls(
                ("create_ticket", {"title": "Damaged", "description": "Crushed box", "priority": "urgent"}),
                ("transfer_to_human", {"reason_type": "liability", "summary": "Damage claim"}),
            ),
            text("Ticket TKT-1 is open and the team has the conversation."),
        ],
    )
    fake_llm.script("alice-cart", [calls(("get_cart", {})), text("Two items.")])
    config = {
        "instructions": "Help alice's customers.",
        "model": {"provider": "openai_compatible", "name": "script:alice-desk"},
        "tools": {
            "builtin": {"create_ticket": {"enabled": True}},
            "http": [{"tool": TOOL_NAME, "enabled": True, "rules": "Only for the customer's own orders."}],
            "client": [CART],
        },
    }
    agent = _ok(api.post("/v1/agents", {"name": "alice agent", "config": config}, format="json"))["id"]
    _ok(api.post(f"/v1/agents/{agent}/publish", {"note": "first"}, format="json"))
    _ok(api.patch(f"/v1/agents/{agent}", {"config": {"instructions": "Second."}}, format="json"), 200)
    _ok(api.post(f"/v1/agents/{agent}/publish", {"note": "second"}, format="json"))

    hook = {"url": "https://hooks.alice.example/k", "event_types": ["run.completed", "ticket.created"]}
    endpoint = _ok(api.post("/v1/webhook_endpoints", hook, format="json"))

    verified = {"end_user": {"external_id": "alice-cust-42", "traits": {"tier": "gold"}}}
    done = _ok(
        api.post("/v1/runs", {"agent": agent, "input": "box crushed", "allow_actions": True, **verified}, format="json")
    )
    engine.run_execute(done["id"])
    assert api.get(f"/v1/runs/{done['id']}").json()["status"] == "completed"

    _ok(api.patch(f"/v1/agents/{agent}", {"config": {"model": {"name": "script:alice-cart"}}}, format="json"), 200)
    _ok(api.post(f"/v1/agents/{agent}/publish", {"note": "cart"}, format="json"))
    session = _ok(api.post("/v1/sessions", {"agent": agent, **verified}, format="json"))["id"]
    paused = _ok(api.post("/v1/runs", {"agent": agent, "session": session, "input": "cart?"}, format="json"))
    engine.run_execute(paused["id"])
    run = api.get(f"/v1/runs/{paused['id']}").json()
    assert run["status"] == "requires_action", run

    source = _ok(
        api.post(
            "/v1/knowledge_sources",
            {"agent": agent, "title": "Returns", "content": "# Returns\n\nThirty days, unused."},
            format="json",
        )
    )["id"]
    event = EgressEvent.objects.create(
        project=alice.project, purpose="http_tool", method="GET", host="api.example.com", decision="allowed"
    )
    end_user_secret = api.get("/v1/end_user_secret").json()["secret"]
    # Stored as a listing would store it: the sweep reaches no MCP server.
    mcp_server = McpServer.objects.create(
        project=alice.project,
        name="alice_mcp",
        url="https://api.example.com/mcp",
        headers={"Authorization": "Bearer {{secret." + SECRET_NAME + "}}"},
        tools=[
            {
                "name": "orders",
                "description": "Orders.",
                "input_schema": {"type": "object"},
                "grantable": True,
                "reason": None,
            }
        ],
    )
    # What a worker does first with the recorded events: a delivery per endpoint (none is attempted here).
    for event_id in WebhookEvent.objects.filter(project=alice.project).values_list("pk", flat=True):
        hook_deliveries.event_dispatch(event_id=event_id)
    delivery = WebhookDelivery.objects.filter(endpoint_id=endpoint["id"]).values_list("pk", flat=True).first()
    assert delivery is not None
    check = Check.objects.create(project=alice.project, agent_id=agent, name="Alice's check", input="hi")
    check_run = CheckRun.objects.create(project=alice.project, agent_id=agent, status="passed")
    return World(
        tenant=alice,
        agent=agent,
        tool=TOOL_NAME,
        secret=SECRET_NAME,
        session=session,
        end_user="alice-cust-42",
        end_user_token=jwt.encode({"sub": "alice-cust-42", "exp": int(time.time()) + 600}, end_user_secret, "HS256"),
        paused_run=paused["id"],
        call_id=run["required_action"]["tool_calls"][0]["call_id"],
        done_run=done["id"],
        ticket=api.get("/v1/tickets").json()["data"][0]["id"],
        handoff=api.get("/v1/handoffs").json()["data"][0]["id"],
        source=source,
        egress_event=f"egress_{event.pk}",
        tool_signing_secret=api.get("/v1/tool_signing_secret").json()["secret"],
        end_user_secret=end_user_secret,
        endpoint=endpoint["id"],
        delivery=delivery,
        endpoint_secret=endpoint["secret"],
        mcp_server=mcp_server.pk,
        check=check.pk,
        check_run=check_run.pk,
    )
