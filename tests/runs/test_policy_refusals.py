"""One test per policy code (seed, "The policy check"), through the engine: the model gets
{"ok": false, "error": {"code", "guidance"}} and nothing runs. The check as a pure function is tested in
tests/tools/test_policy.py."""

from __future__ import annotations

import datetime
import json

import pytest
from django.utils import timezone

from agents.models import AgentVersion
from desk.models import Handoff, Ticket, TicketCounter
from fakes.llm import calls, text
from runs.models import Run, ToolCall
from tests.runs.conftest import VERIFIED
from tests.tools.test_schema_bounds import fan_out

pytestmark = pytest.mark.django_db
DONE = text("Sorry, that didn't work.")


def refusals(h, run_id):
    return [(c["name"] or c["requested_name"], c["policy"]["code"]) for c in h.tool_steps(run_id)]


def model_saw(h, script, turn=1):
    request = [r for r in h.fake.requests(script) if r.turn == turn][-1]
    results = []
    for item in request.new_tool_results:
        content = item["content"]
        assert content.startswith("[TOOL FAILED]"), content
        results.append(json.loads(content.split("\n", 1)[1]))
    return results


def test_tool_not_available_for_an_unknown_or_switched_off_tool(h):
    agent = h.agent(
        "unknown", [calls(("delete_account", {}), ("create_ticket", {"title": "a", "description": "b"})), DONE]
    )
    run = h.run(agent)
    assert refusals(h, run["id"]) == [("delete_account", "tool_not_available"), ("create_ticket", "tool_not_available")]
    seen = model_saw(h, "unknown")
    assert seen[0]["ok"] is False and seen[0]["error"]["code"] == "tool_not_available"
    assert "transfer_to_human" in seen[0]["error"]["guidance"]  # the guidance names what is offered
    assert not Ticket.objects.exists()


def test_tools_master_switch_off_removes_every_tool(h):
    agent = h.agent(
        "switched-off",
        [calls(("transfer_to_human", {"reason_type": "complaint", "summary": "x"})), DONE],
        tools={"enabled": False, "builtin": {"transfer_to_human": {"enabled": True}}},
    )
    run = h.run(agent)
    assert h.fake.requests("switched-off")[0].tool_names == []
    assert refusals(h, run["id"]) == [("transfer_to_human", "tool_not_available")]
    assert not Handoff.objects.exists()


@pytest.mark.parametrize(
    "arguments",
    [
        {"reason_type": "angry", "summary": "x"},  # not in the enum
        {"reason_type": "complaint"},  # summary missing
        {"reason_type": "complaint", "summary": "x", "customer_email": "a@b.c"},  # extra key: strict
        '{"reason_type": "complaint", "summary": ',  # not JSON
        '["complaint"]',
    ],
)
def test_invalid_arguments(h, arguments):
    agent = h.agent("bad-args", [calls(("transfer_to_human", arguments)), DONE])
    run = h.run(agent)
    assert refusals(h, run["id"]) == [("transfer_to_human", "invalid_arguments")]
    assert model_saw(h, "bad-args")[0]["error"]["guidance"]
    assert not Handoff.objects.exists()


def test_outside_business_hours(h):
    today = timezone.now().date().isoformat()
    agent = h.agent(
        "closed",
        [calls(("transfer_to_human", {"reason_type": "complaint", "summary": "x"})), DONE],
        business_hours={"timezone": "UTC", "closed_dates": [today]},
    )
    run = h.run(agent)
    assert refusals(h, run["id"]) == [("transfer_to_human", "outside_business_hours")]
    assert not Handoff.objects.exists()


def test_inside_business_hours_the_handoff_runs(h):
    now = timezone.now()
    day = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")[now.weekday()]
    agent = h.agent(
        "open",
        [calls(("transfer_to_human", {"reason_type": "complaint", "summary": "x"})), text("The team has it.")],
        business_hours={"timezone": "UTC", "weekly": [{"day": day, "open": "00:00", "close": "24:00"}]},
    )
    h.run(agent)
    assert Handoff.objects.count() == 1


def test_not_available_when_actions_are_paused_mid_segment(h):
    agent = h.agent(
        "paused",
        [text("ok"), calls(("create_ticket", {"title": "a", "description": "b"})), DONE],
        tools={"builtin": {"create_ticket": {"enabled": True}}},
    )
    session = h.session(agent, **VERIFIED)
    h.run(agent, "first", session=session, **VERIFIED)
    h.api.patch(f"/v1/agents/{agent}", {"actions_paused": True}, format="json")
    run = h.run(agent, "second", session=session, **VERIFIED)
    assert refusals(h, run["id"]) == [("create_ticket", "not_available")]
    assert not Ticket.objects.exists()


def test_not_available_search_knowledge_after_its_sources_went_away(h):
    from agents.models import KnowledgeSource

    source = KnowledgeSource.objects.create(project=h.tenant.project, title="Returns", content="30 days")
    agent = h.agent("kb", [calls(("search_knowledge", {"query": "returns"})), DONE])
    session = h.session(agent)
    started = h.start(agent, "returns?", session=session)
    source.delete()
    h.drive(started["id"])
    assert refusals(h, started["id"]) == [("search_knowledge", "not_available")]


def test_ticket_already_open_gives_the_existing_number(h):
    turn = calls(("create_ticket", {"title": "Late", "description": "Order late"}))
    agent = h.agent(
        "one-ticket", [turn, text("Ticket TKT-1 is open.")], tools={"builtin": {"create_ticket": {"enabled": True}}}
    )
    h.run(agent, "late", allow_actions=True, **VERIFIED)
    h.fake.script("one-ticket", [turn, text("Your ticket TKT-1 is already open.")])
    run = h.run(agent, "still late", allow_actions=True, **VERIFIED)
    assert refusals(h, run["id"]) == [("create_ticket", "ticket_already_open")]
    assert "TKT-1" in model_saw(h, "one-ticket")[0]["error"]["guidance"]
    assert Ticket.objects.count() == 1
    # TKT-1 came from a tool result (the refusal's guidance), so saying it is true.
    assert run["output"]["unverified_claims"] == []


def test_duplicate_call(h):
    same = ("transfer_to_human", {"reason_type": "complaint", "summary": "x"})
    agent = h.agent("dup", [calls(same), calls(same), text("The team has it.")])
    run = h.run(agent)
    assert refusals(h, run["id"]) == [("transfer_to_human", None), ("transfer_to_human", "duplicate_call")]
    assert Handoff.objects.count() == 1


def test_run_cancelled_stops_the_rest_of_the_round(h):
    agent = h.agent(
        "cancel-mid",
        [
            calls(
                ("transfer_to_human", {"reason_type": "complaint", "summary": "a"}),
                ("flag_conversation", {"reason": "b"}),
            ),
            DONE,
        ],
        tools={"builtin": {"flag_conversation": {"enabled": True}}},
    )
    session = h.session(agent)
    started = h.start(agent, "x", session=session)
    # The first call's execution requests a cancel (as the API would, from another process).
    from tools import builtins

    original = builtins.executor("transfer_to_human")

    def then_cancel(run, call, args):
        result = original(run, call, args)
        Run.objects.filter(pk=run.pk).update(cancel_requested=True, cancellation_reason="requested")
        return result

    builtins._EXECUTORS["transfer_to_human"] = then_cancel
    try:
        run = h.drive(started["id"])
    finally:
        builtins._EXECUTORS["transfer_to_human"] = original
    assert run["status"] == "cancelled" and run["cancellation_reason"] == "requested"
    assert refusals(h, run["id"]) == [("transfer_to_human", None), ("flag_conversation", "run_cancelled")]
    assert len(h.fake.requests("cancel-mid")) == 1  # no model call after the cancel


def test_rate_limited_tickets_five_a_day(h):
    agent = h.agent("ticket-limit", None, tools={"builtin": {"create_ticket": {"enabled": True}}})
    for n in range(5):
        Ticket.objects.create(
            project=h.tenant.project,
            number=n + 1,
            title="t",
            description="d",
            status="closed",
            rate_key="eu:placeholder",
        )
    from conversations.models import EndUser

    user = EndUser.objects.create(project=h.tenant.project, external_id="cust-42")
    Ticket.objects.update(rate_key=f"eu:{user.pk}")
    TicketCounter.objects.create(project=h.tenant.project, last_number=5)
    h.fake.script("ticket-limit", [calls(("create_ticket", {"title": "a", "description": "b"})), DONE])
    run = h.run(agent, "x", allow_actions=True, **VERIFIED)
    assert refusals(h, run["id"]) == [("create_ticket", "rate_limited")]
    assert Ticket.objects.count() == 5
    # A day later the window has moved on.
    Ticket.objects.update(created_at=timezone.now() - datetime.timedelta(days=1, minutes=1))
    h.fake.script("ticket-limit", [calls(("create_ticket", {"title": "a", "description": "b"})), text("TKT-6 open.")])
    run = h.run(agent, "x", allow_actions=True, **VERIFIED)
    assert refusals(h, run["id"]) == [("create_ticket", None)]


def test_round_budget_exhausted_and_too_many_calls(h):
    six = [("transfer_to_human", {"reason_type": "complaint", "summary": f"s{i}"}) for i in range(6)]
    agent = h.agent("budget", [calls(*six), text("The team has it.")], tools={"max_tool_rounds": 1})
    run = h.run(agent)
    codes = [code for _, code in refusals(h, run["id"])]
    assert codes == [None] * 5 + ["too_many_calls"]
    assert Handoff.objects.count() == 5
    assert ToolCall.objects.filter(policy_code="too_many_calls", status="refused").count() == 1


def test_a_client_tool_schema_with_a_catastrophic_pattern_property_cannot_hold_the_worker(h):
    # Issue #13, finding 2: patternProperties ran through Python's re with no time limit (6.4 s at 26 characters,
    # doubling per character). Now the call is refused in time and nothing pauses for the app.
    import time

    client_tool = {
        "name": "get_cart",
        "description": "The cart.",
        "parameters": {"type": "object", "patternProperties": {"^(a+)+$": {}}},
        "effect": "read",
    }
    agent = h.agent("slow-pattern", [calls(("get_cart", {"a" * 40 + "!": 1})), DONE], tools={"client": [client_tool]})
    started = time.monotonic()
    run = h.run(agent, **VERIFIED)
    assert time.monotonic() - started < 10
    assert run["status"] == "completed", run
    assert refusals(h, run["id"]) == [("get_cart", "invalid_arguments")]


def test_a_client_tool_schema_stored_before_the_bounds_is_refused_not_run(h):
    # Issue #27, finding 2: a published version whose client tool schema fans out through its references (2**40
    # subschemas to validate) from before the write-time bounds. The call is refused; the schema is never run.
    client_tool = {"name": "get_cart", "description": "The cart.", "effect": "read"}
    agent = h.agent("fan-out", [calls(("get_cart", {"q": "x"})), DONE], tools={"client": [client_tool]})
    version = AgentVersion.objects.get(agent_id=agent)
    version.config["tools"]["client"][0]["parameters"] = fan_out(40, nested=True)
    AgentVersion.objects.filter(pk=version.pk).update(config=version.config)
    run = h.run(agent, **VERIFIED)
    assert run["status"] == "completed", run
    assert refusals(h, run["id"]) == [("get_cart", "invalid_arguments")]
    assert "outside the bounds" in model_saw(h, "fan-out")[0]["error"]["guidance"]
