"""The truthfulness guard through the API and the stream (issue #38): an agent with `create_ticket` and an action
tool, a model that calls nothing and answers with a claim — pushed back twice, then listed in `unverified_claims`
and `output.claims`, and never streamed; an honest answer passes at once and streams whole."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.llm import calls, text
from tests.guard.test_claims import REGRESSIONS
from tests.runs.conftest import VERIFIED
from tests.runs.test_live_answer import answer_events, followed_run

pytestmark = pytest.mark.django_db

TOOLS = {
    "builtin": {"create_ticket": {"enabled": True}},
    "client": [
        {
            "name": "cancel_order",
            "description": "Cancels the customer's order.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
            "effect": "action",
        }
    ],
}


def agent_answering(h: Any, name: str, answer: str, **config: Any) -> str:
    return h.agent(name, [text(answer)] * 3, tools=TOOLS, **config)


@pytest.mark.parametrize(("answer", "kind"), REGRESSIONS.items())
def test_a_claim_no_tool_made_is_pushed_back_listed_and_never_streamed(h, answer, kind):
    agent = agent_answering(h, f"claim-{abs(hash(answer)) % 10**8}", answer)
    run_id = followed_run(h, agent, "hello")
    run = h.get(run_id)
    assert run["status"] == "completed", run
    output = run["output"]
    assert output["text"] == answer.strip()  # as written, Markdown kept
    assert kind in {claim["kind"] for claim in output["claims"]}
    assert output["unverified_claims"] == [claim["text"] for claim in output["claims"]]
    assert len(h.fake.requests(f"claim-{abs(hash(answer)) % 10**8}")) == 3  # two push-backs
    got = answer_events(h, run_id)
    assert got and got[-1]["event"] == "run.output.reset"  # the stream ends on a reset: nothing of it stands
    streamed = "".join(e["data"]["delta"] for e in got if e["event"] == "run.output.delta")
    assert streamed == ""  # a one-sentence claim is never released, not even once


HONEST = [
    "Would you like me to cancel your order?",
    "I can open a ticket for you if you'd like. **Just say the word.**",
    "Your order has not been cancelled yet.\nI can do it now if you want.",
    "Refunds are accepted within **30 days** of delivery, as our policy says.",
]


@pytest.mark.parametrize("answer", HONEST)
def test_an_honest_answer_passes_at_once_and_streams_whole(h, answer):
    name = f"honest-{abs(hash(answer)) % 10**8}"
    agent = agent_answering(h, name, answer, instructions="Refund policy: returns are accepted within 30 days.")
    run_id = followed_run(h, agent, "hello")
    run = h.get(run_id)
    assert run["output"] == {"text": answer, "unverified_claims": [], "claims": []}
    assert len(h.fake.requests(name)) == 1
    got = answer_events(h, run_id)
    assert "".join(e["data"]["delta"] for e in got if e["event"] == "run.output.delta") == answer


def test_a_number_the_customer_typed_is_said_back(h):
    agent = agent_answering(h, "ref-given", "Thanks, I can see booking reference 8812 in your message.")
    run = h.run(agent, "hello, my booking reference is ٨٨١٢")
    assert run["output"]["claims"] == [] and len(h.fake.requests("ref-given")) == 1


def test_a_ticket_the_tool_made_is_true_and_one_it_did_not_is_a_claim(h):
    agent = h.agent(
        "ticket-made",
        [calls(("create_ticket", {"title": "Late parcel", "description": "Late", "priority": "normal",
                                  "resolution_attempted": "none"})),
         text("I've opened ticket TKT-1 for you.")],
        tools=TOOLS,
    )  # fmt: skip
    session = h.session(agent, **VERIFIED)
    run = h.run(agent, "my parcel is late", session=session, **VERIFIED)
    assert run["output"]["claims"] == [], run["output"]
    other = agent_answering(h, "ticket-invented", "I've opened ticket TKT-77 for you.")
    run = h.run(other, "my parcel is late", **VERIFIED)
    assert {claim["kind"] for claim in run["output"]["claims"]} == {"ungrounded_reference", "unbacked_action"}


def test_a_lookup_result_grounds_what_it_says(h, upstream, egress_settings):
    from tests.runs.test_http_tools import order_tool, setup_tool

    tool = order_tool(name="my_tickets", description="The customer's open helpdesk tickets.")
    tool["config"]["response"] = {
        "items_path": "data",
        "fields": [{"path": "id", "label": "Ticket"}, {"path": "state", "label": "State"}],
        "max_items": 5,
    }
    tool["config"]["parameters"] = {
        "type": "object",
        "properties": {"order_number": {"type": "string"}},
        "required": ["order_number"],
        "additionalProperties": False,
    }
    setup_tool(h, upstream, tool)
    upstream.respond("order", json_body={"data": [{"id": "4521", "state": "in progress"}]})
    answer = "Your ticket number is **4521** and it is in progress."
    agent = h.agent("helpdesk", [calls(("my_tickets", {"order_number": "8812"})), text(answer)],
                    tools={"http": [{"tool": "my_tickets"}]})  # fmt: skip
    run = h.run(agent, "any news on order 8812?", **VERIFIED)
    assert run["output"]["claims"] == [] and len(h.fake.requests("helpdesk")) == 2


def test_a_run_whose_model_answers_hostile_text_finishes_in_seconds(h):
    import time

    hostile = "ticket" + " " * 300 + "x " + "a" + " " * 50_000 + "x"
    agent = h.agent("hostile-answer", [text(hostile)] * 3)
    started = time.monotonic()
    run = h.run(agent)
    assert run["status"] == "completed", run
    assert time.monotonic() - started < 10
