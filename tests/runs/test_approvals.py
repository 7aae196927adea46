"""A person's approval before an action runs (SPEC §5 "Approvals", issue 29), through the API and the run engine: an
action whose grant says `approval: ask` waits with nothing sent, a publishable key sees that it waits and can't
approve, an approved call runs exactly once (checked by the policy again), a denied or expired one reaches the model
as approval_denied / approval_expired and the run goes on, wrong decisions are refused with their codes, `scope:
session` approves the tool for the rest of the conversation, and the webhooks say so."""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

import jwt
import pytest
from django.utils import timezone

from desk.models import Ticket
from fakes.llm import calls, text
from hooks.models import WebhookEvent
from hooks.services import endpoint_create
from kagent.models import SigningSecret
from kagent.secrets import signing_secrets_valid
from runs.lifecycle import run_sweep
from runs.models import Run, ToolCall
from tests.runs.conftest import VERIFIED, Harness
from tests.runs.test_http_tools import order_tool

pytestmark = pytest.mark.django_db

TICKET = {"title": "Refund", "description": "The parcel arrived broken."}
ASK = {"builtin": {"create_ticket": {"enabled": True, "approval": "ask"}}}


def end_user_token(h: Harness, sub: str) -> str:
    secret = h.api.get("/v1/end_user_secret").json()["secret"]
    return jwt.encode({"sub": sub, "exp": int(time.time()) + 300}, secret, "HS256")


def waiting_run(
    h: Harness, script: str = "ask", tools: dict[str, Any] | None = None, answer: str = "Thanks, that's noted."
) -> dict[str, Any]:
    agent = h.agent(script, [calls(("create_ticket", TICKET)), text(answer)], tools=tools or ASK)
    session = h.session(agent, **VERIFIED)
    run = h.run(agent, "my parcel is broken, refund it", session=session)
    return run


def decide(h: Harness, run: dict[str, Any], decision: str = "approve", **extra: Any):
    decisions = [{"call_id": c["call_id"], "decision": decision, **extra} for c in run["required_action"]["tool_calls"]]
    return h.api.post(f"/v1/runs/{run['id']}/approve_tool_calls", {"decisions": decisions}, format="json")


def test_an_action_waits_for_approval_with_nothing_done_and_runs_once_approved(h: Harness):
    """The customer's browser starts the run (a publishable key, the customer's token); the business decides."""
    agent = h.agent("ask", [calls(("create_ticket", TICKET)), text("I've opened a ticket for the refund.")], tools=ASK)
    browser = h.tenant.client(h.tenant.publishable_key)
    token = end_user_token(h, "cust-42")
    session = browser.post("/v1/sessions", {"agent": agent, "end_user_token": token}, format="json").json()["id"]
    started = browser.post(
        "/v1/runs", {"agent": agent, "session": session, "input": "refund it", "end_user_token": token}, format="json"
    )
    assert started.status_code == 201, started.json()
    run = h.drive(started.json()["id"])
    assert run["status"] == "requires_action", run
    action = run["required_action"]
    assert action["type"] == "approve_tool_calls" and action["expires_at"] > timezone.now().timestamp() + 29 * 60
    [waiting] = action["tool_calls"]
    assert waiting["name"] == "create_ticket" and waiting["arguments"]["title"] == "Refund"
    assert not Ticket.objects.exists()  # nothing done before a decision
    assert ToolCall.objects.get(pk=waiting["call_id"]).status == "awaiting_approval"

    # The customer's browser sees that the run waits, not what it waits to do; it can't approve, nor answer it as
    # tool outputs.
    seen = browser.get(f"/v1/runs/{run['id']}", HTTP_X_END_USER_TOKEN=token)
    assert seen.status_code == 200, seen.json()
    assert seen.json()["required_action"] == {"type": "approve_tool_calls", "expires_at": action["expires_at"]}
    refused = browser.post(
        f"/v1/runs/{run['id']}/approve_tool_calls",
        {"decisions": [{"call_id": waiting["call_id"], "decision": "approve"}]},
        format="json",
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "publishable_key_not_allowed"
    outputs = h.api.post(
        f"/v1/runs/{run['id']}/submit_tool_outputs", {"tool_outputs": [{"call_id": waiting["call_id"]}]}, format="json"
    )
    assert outputs.status_code == 409 and outputs.json()["error"]["code"] == "run_not_awaiting_outputs"

    approved = decide(h, run, note="Checked the photos.")
    assert approved.status_code == 200, approved.json()
    assert approved.json()["status"] == "queued" and approved.json()["required_action"] is None
    done = h.drive(run["id"])
    assert done["status"] == "completed", done
    assert Ticket.objects.count() == 1  # exactly once
    [call] = h.tool_steps(run["id"])
    assert call["status"] == "succeeded"
    assert call["approval"]["decision"] == "approve" and call["approval"]["note"] == "Checked the photos."
    assert call["approval"]["decided_by"]["type"] == "api_key"
    # Answered: a second decision finds nothing waiting.
    again = decide(h, run)
    assert again.status_code == 409 and again.json()["error"]["code"] == "run_not_awaiting_approval"


def test_a_denied_http_action_is_never_sent_and_the_model_hears_why(h: Harness, upstream, egress_settings):
    assert h.api.put(
        "/v1/secrets/ORDERS_TOKEN", {"value": "tok-0123456789", "allowed_hosts": ["tools.test"]}, format="json"
    ).status_code in (200, 201)
    action = order_tool(name="refund_order", effect="action", description="Refund the customer's order.")
    action["config"] = {**action["config"], "method": "POST", "body": {"order": "{{args.order_number}}"}}
    assert h.api.post("/v1/tools", action, format="json").status_code == 201
    upstream.secrets = signing_secrets_valid(project=h.tenant.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    agent = h.agent(
        "deny",
        [calls(("refund_order", {"order_number": "8812"})), text("I couldn't refund it: the team declined.")],
        tools={"http": [{"tool": "refund_order", "approval": "ask"}]},
    )
    run = h.run(agent, "refund 8812", allow_actions=True, **VERIFIED)
    assert run["status"] == "requires_action"
    assert decide(h, run, "deny", note="Outside the refund window.").status_code == 200
    done = h.drive(run["id"])
    assert done["status"] == "completed"
    assert upstream.received == []  # never sent
    [call] = h.tool_steps(run["id"])
    assert call["status"] == "refused" and call["shown_to_model"]["error"]["code"] == "approval_denied"
    assert call["approval"]["note"] == "Outside the refund window."
    model_saw = h.fake.requests("deny")[1].new_tool_results[0]["content"]
    assert "approval_denied" in model_saw and "nothing was done" in model_saw


def test_wrong_decisions_are_refused_with_their_codes(h: Harness):
    agent = h.agent(
        "two",
        [calls(("create_ticket", TICKET), ("create_ticket", {**TICKET, "title": "Other"})), text("ok")],
        tools=ASK,
    )
    run = h.run(agent, "two tickets", allow_actions=True, **VERIFIED)
    first, second = (c["call_id"] for c in run["required_action"]["tool_calls"])
    path = f"/v1/runs/{run['id']}/approve_tool_calls"

    def post(decisions: Any):
        return h.api.post(path, {"decisions": decisions}, format="json")

    cases = [
        ([{"call_id": first, "decision": "approve"}], 422, "decisions_incomplete"),
        (
            [{"call_id": first, "decision": "approve"}, {"call_id": "call_nope", "decision": "deny"}],
            422,
            "unknown_call_id",
        ),
        ([{"call_id": first, "decision": "approve"}, {"call_id": first, "decision": "deny"}], 422, "duplicate_call_id"),
        ([{"call_id": first, "decision": "maybe"}, {"call_id": second, "decision": "deny"}], 422, None),
        ([{"call_id": first, "decision": "approve", "scope": "forever"}], 422, None),
        ("approve all", 422, None),
    ]
    for decisions, status, code in cases:
        response = post(decisions)
        assert response.status_code == status, (decisions, response.json())
        if code:
            assert response.json()["error"]["code"] == code
    assert ToolCall.objects.filter(run_id=run["id"], status="awaiting_approval").count() == 2  # nothing half-written
    assert Run.objects.get(pk=run["id"]).status == "requires_action"

    ok = post([{"call_id": first, "decision": "approve"}, {"call_id": second, "decision": "deny"}])
    assert ok.status_code == 200
    h.drive(run["id"])
    assert [t.title for t in Ticket.objects.all()] == ["Refund"]
    completed = h.api.post(path, {"decisions": []}, format="json")
    assert completed.status_code == 409 and completed.json()["error"]["code"] == "run_not_awaiting_approval"


def test_an_approval_nobody_gives_expires_and_the_run_goes_on(h: Harness):
    run = waiting_run(h, "expire", answer="I am sorry, I could not do that right now.")
    Run.objects.filter(pk=run["id"]).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    assert run_sweep()["expired"] == 1
    assert Run.objects.get(pk=run["id"]).status == "queued"
    done = h.drive(run["id"])
    assert done["status"] == "completed"
    [call] = h.tool_steps(run["id"])
    assert call["shown_to_model"]["error"]["code"] == "approval_expired" and call["approval"]["decision"] == "expired"
    assert not Ticket.objects.exists()


def test_the_policy_is_checked_again_when_an_approved_call_runs(h: Harness):
    run = waiting_run(h, "recheck")
    assert (
        h.api.patch(
            f"/v1/agents/{Run.objects.get(pk=run['id']).agent_id}", {"actions_paused": True}, format="json"
        ).status_code
        == 200
    )
    assert decide(h, run).status_code == 200
    h.drive(run["id"])
    [call] = h.tool_steps(run["id"])
    assert call["status"] == "refused" and call["policy"]["code"] == "not_available"
    assert not Ticket.objects.exists()


def test_session_scope_approves_the_tool_for_the_rest_of_the_conversation(h: Harness):
    agent = h.agent("scope", [calls(("create_ticket", TICKET)), text("Done.")], tools=ASK)
    session = h.session(agent, **VERIFIED)
    first = h.run(agent, "ticket please", session=session)
    assert decide(h, first, scope="session").status_code == 200
    h.drive(first["id"])
    Ticket.objects.all().update(status="closed")  # one open ticket per customer: let the next one be made
    # The fake model answers by the number of assistant messages it is sent, and the conversation already holds
    # one ("Done."): a second script (a new version naming it) for the second run, whose first answer is a call.
    config = {"model": {"provider": "openai_compatible", "name": "script:scope-2"}}
    assert h.api.patch(f"/v1/agents/{agent}", {"config": config}, format="json").status_code == 200
    assert h.api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
    second_turns = [calls(("create_ticket", {**TICKET, "title": "Second"})), text("Again.")]
    h.fake.script("scope-2", [text("(not reached)"), *second_turns])
    second = h.run(agent, "another ticket", session=session)
    assert second["status"] == "completed", second  # no second wait in this conversation
    assert Ticket.objects.filter(title="Second").exists()
    # The call that didn't wait still records whose approval it ran under, and on which call it was given.
    [given] = h.tool_steps(first["id"])
    [allowed] = h.tool_steps(second["id"])
    assert allowed["status"] == "succeeded" and allowed["approval"]["given_on"] == given["call_id"]
    assert {k: v for k, v in allowed["approval"].items() if k != "given_on"} == given["approval"]
    assert given["approval"]["scope"] == "session" and given["approval"]["decided_by"]
    Ticket.objects.all().update(status="closed")
    other = h.session(agent, **VERIFIED)  # another conversation: the approval doesn't reach it
    h.fake.script("scope-2", [calls(("create_ticket", {**TICKET, "title": "Third"})), text("Done.")])
    assert h.run(agent, "ticket", session=other)["status"] == "requires_action"


def test_approvals_come_before_client_tool_outputs_in_one_round(h: Harness):
    tools = {**ASK, "client": [{"name": "get_cart", "description": "The cart.", "effect": "read"}]}
    agent = h.agent("both", [calls(("create_ticket", TICKET), ("get_cart", {})), text("ok")], tools=tools)
    session = h.session(agent, **VERIFIED)
    run = h.run(agent, "cart and ticket", session=session)
    assert run["required_action"]["type"] == "approve_tool_calls"
    assert decide(h, run).status_code == 200
    paused = h.drive(run["id"])
    assert paused["status"] == "requires_action" and paused["required_action"]["type"] == "submit_tool_outputs"
    [cart] = paused["required_action"]["tool_calls"]
    answered = h.api.post(
        f"/v1/runs/{run['id']}/submit_tool_outputs",
        {"tool_outputs": [{"call_id": cart["call_id"], "output": {"items": 2}}]},
        format="json",
    )
    assert answered.status_code == 200
    assert h.drive(run["id"])["status"] == "completed"
    assert Ticket.objects.count() == 1


def test_a_new_run_supersedes_one_waiting_for_approval(h: Harness):
    agent = h.agent("supersede", [calls(("create_ticket", TICKET)), text("ok")], tools=ASK)
    session = h.session(agent, **VERIFIED)
    waiting = h.run(agent, "ticket", session=session)
    h.fake.script("supersede", [text("Hello again.")])
    h.run(agent, "never mind", session=session)
    superseded = h.get(waiting["id"])
    assert superseded["status"] == "cancelled" and superseded["cancellation_reason"] == "superseded"
    assert ToolCall.objects.get(run_id=waiting["id"]).status == "cancelled"
    assert decide(h, waiting).json()["error"]["code"] == "run_not_awaiting_approval"


def test_webhooks_say_an_approval_was_requested_and_decided(h: Harness):
    endpoint_create(
        project=h.tenant.project,
        url="https://hooks.alice.example/in",
        event_types=["approval.requested", "approval.decided"],
    )
    run = waiting_run(h, "hooks")
    [requested] = WebhookEvent.objects.filter(type="approval.requested")
    call_id = run["required_action"]["tool_calls"][0]["call_id"]
    assert requested.object_id == call_id
    assert requested.data["status"] == "waiting" and requested.data["run"] == run["id"]
    assert requested.data["arguments"]["title"] == "Refund" and requested.data["expires_at"]
    decide(h, run, "deny", note="No.")
    [decided] = WebhookEvent.objects.filter(type="approval.decided")
    assert decided.data["status"] == "denied" and decided.data["decision"]["note"] == "No."
    assert json.dumps(decided.data)  # plain JSON


@pytest.mark.parametrize(
    "tools",
    [
        {"builtin": {"search_knowledge": {"approval": "ask"}}},
        {"builtin": {"transfer_to_human": {"approval": "ask"}}},
        {"builtin": {"create_ticket": {"approval": "sometimes"}}},
    ],
    ids=["read", "escalation", "bad-value"],
)
def test_only_actions_can_ask_for_approval(h: Harness, tools):
    response = h.api.post("/v1/agents", {"name": "x", "config": {"tools": tools}}, format="json")
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_config"


def test_a_run_may_wait_for_a_person_every_round_without_running_out_of_claims(h: Harness):
    """Each resume after a pause is a claim, but no crash: five rounds that each wait for a decision still end."""
    action = order_tool(name="refund_order", effect="action", description="Refund the customer's order.")
    action["config"] = {**action["config"], "method": "POST", "body": {"order": "{{args.order_number}}"}}
    assert h.api.post("/v1/tools", action, format="json").status_code == 201
    rounds = [calls(("refund_order", {"order_number": str(8800 + n)})) for n in range(5)]
    agent = h.agent(
        "rounds",
        [*rounds, text("I couldn't refund any of them.")],
        tools={"http": [{"tool": "refund_order", "approval": "ask"}], "max_tool_rounds": 5},
    )
    run = h.run(agent, "refund everything", allow_actions=True, **VERIFIED)
    for _ in range(5):
        assert run["status"] == "requires_action", run
        assert decide(h, run, "deny").status_code == 200
        run = h.drive(run["id"])
    assert run["status"] == "completed", run
    assert Run.objects.get(pk=run["id"]).claims == 6


def test_a_superseded_wait_tells_the_webhook_it_was_cancelled(h: Harness):
    endpoint_create(project=h.tenant.project, url="https://hooks.alice.example/in", event_types=["approval.decided"])
    agent = h.agent("gone", [calls(("create_ticket", TICKET)), text("ok")], tools=ASK)
    session = h.session(agent, **VERIFIED)
    h.run(agent, "ticket", session=session)
    h.fake.script("gone", [text("Hello again.")])
    h.run(agent, "never mind", session=session)
    [decided] = WebhookEvent.objects.filter(type="approval.decided")
    assert decided.data["status"] == "cancelled" and decided.data["decision"] is None
