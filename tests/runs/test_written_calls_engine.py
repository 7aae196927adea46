"""Tool calls written as text (SPEC §5) through the real engine and the scripted model: recovered, checked by the
same policy, recorded as the model's tool calls, and never shown: not in the answer, the steps, the session's
messages, a browser's events or the webhook data. The reading itself: test_written_calls.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from desk.models import Handoff
from fakes.llm import calls, text
from llm.written_calls import UNREADABLE_CALL_NAME, written_call_id
from runs.models import Run, ToolCall
from runs.webhook_events import run_data
from tests.runs.conftest import VERIFIED, Harness
from tests.runs.test_http_tools import setup_tool
from tests.runs.test_policy_refusals import model_saw, refusals
from tests.runs.test_run_events import events

pytestmark = pytest.mark.django_db

HANDOFF_ARGUMENTS = {"reason_type": "complaint", "summary": "Parcel arrived damaged"}
HANDOFF_BLOCK = json.dumps({"name": "transfer_to_human", "arguments": HANDOFF_ARGUMENTS})
ASKING = f"Let me get someone for you.\n<tool_call>{HANDOFF_BLOCK}</tool_call>\n"
ORDER_BLOCK = '<invoke name="order_status">\n<parameter name="order_number">8812</parameter>\n</invoke>'
MARKS = ("<tool_call", "</tool_call", "<invoke", "</invoke", "<parameter")


@pytest.fixture(autouse=True)
def models_that_write_their_calls(monkeypatch: Any) -> None:
    """Every agent here declares that its model writes tool calls as text (`model.text_tool_calls`), unless it names
    a model of its own: only then are written calls recovered (test_quoted_tool_calls.py: the default)."""
    original = Harness.agent

    def agent(self: Harness, script: str, turns: list[Any] | None = None, **config: Any) -> str:
        config.setdefault(
            "model", {"provider": "openai_compatible", "name": f"script:{script}", "text_tool_calls": True}
        )
        return original(self, script, turns, **config)

    monkeypatch.setattr(Harness, "agent", agent)


def no_block_in(*shown: Any) -> None:
    for item in shown:
        dumped = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
        assert not any(mark in dumped for mark in MARKS), dumped


def test_a_call_written_as_text_runs_as_the_models_call_and_is_never_shown(h):
    agent = h.agent("written", [text(ASKING), text("Someone from our team will continue here.")])
    browser = h.tenant.client(h.tenant.publishable_key)
    session = browser.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    run = browser.post("/v1/runs", {"agent": agent, "session": session, "input": "my parcel is broken"}, format="json")
    run = h.drive(run.json()["id"])

    assert run["status"] == "completed" and run["rounds"] == 1
    assert run["output"] == {"text": "Someone from our team will continue here.", "unverified_claims": [], "claims": []}
    assert Handoff.objects.get().summary == "Parcel arrived damaged"
    [call] = h.tool_steps(run["id"])
    assert call["name"] == "transfer_to_human" and call["status"] == "succeeded"
    assert call["policy"] == {"decision": "allowed", "code": None}
    assert ToolCall.objects.get().model_call_id == written_call_id(run["id"], 1, 0)
    # The model's step holds the call, not the block; it says the call came as text.
    asked = h.steps(run["id"])[0]["model_call"]
    assert asked["text"] == "Let me get someone for you.\n\n"
    assert asked["tool_calls_written_as_text"] is True
    assert [(c["name"], json.loads(c["arguments"])) for c in asked["tool_calls"]] == [
        ("transfer_to_human", HANDOFF_ARGUMENTS)
    ]
    # The next request is well-formed: the assistant's turn carries the call natively, and its result answers it.
    second = h.fake.requests("written")[1]
    [assistant] = [m for m in second.messages if m["role"] == "assistant"]
    assert assistant["content"] == "Let me get someone for you.\n\n"
    [native] = assistant["tool_calls"]
    assert native["id"] == call_id(run) and native["function"]["name"] == "transfer_to_human"
    [result] = second.new_tool_results
    assert result["tool_call_id"] == native["id"] and json.loads(result["content"])["ok"] is True

    no_block_in(
        run,
        h.steps(run["id"]),
        h.api.get(f"/v1/sessions/{session}/messages").json(),
        browser.get(f"/v1/sessions/{session}/messages").json(),
        events(browser, run["id"]),
        run_data(Run.objects.get(pk=run["id"]), Run.Status.COMPLETED),
        Run.objects.get(pk=run["id"]).transcript,
    )


def call_id(run: dict[str, Any]) -> str:
    return ToolCall.objects.get(run_id=run["id"]).model_call_id


def test_an_http_tool_written_as_an_invoke_block(h, upstream, egress_settings):
    setup_tool(h, upstream)
    agent = h.agent(
        "written-http",
        [text(f"Checking.\n{ORDER_BLOCK}"), text("Order 8812 has shipped and arrives Tuesday.")],
        tools={"http": [{"tool": "order_status"}]},
    )
    run = h.run(agent, "where is my order 8812?", **VERIFIED)
    assert run["status"] == "completed", run
    [received] = upstream.received
    assert received.path == "/respond/order/customers/cust-42/orders/8812?tier=gold"
    [call] = h.tool_steps(run["id"])
    assert received.headers["webhook-id"] == call["call_id"]
    assert call["arguments"] == {"order_number": "8812"}  # the schema's string stays a string
    assert call["status"] == "succeeded"
    no_block_in(run, h.steps(run["id"]))


def test_a_written_call_needing_a_verified_user_is_refused_and_nothing_is_sent(h, upstream, egress_settings):
    setup_tool(h, upstream)
    agent = h.agent(
        "written-anon",
        [text(ORDER_BLOCK), text("Please sign in to the app so I can look that up.")],
        tools={"http": [{"tool": "order_status"}]},
    )
    run = h.run(agent, "where is my order 8812?")
    assert refusals(h, run["id"]) == [("order_status", "verified_user_required")]
    assert upstream.received == []
    assert model_saw(h, "written-anon")[0]["error"]["code"] == "verified_user_required"
    assert run["output"]["text"].startswith("Please sign in")


def test_unknown_unreadable_and_malformed_written_calls_are_refused_and_the_model_hears_why(h):
    written = (
        'Working on it. <tool_call>{"name": "delete_account", "arguments": {}}</tool_call>'
        "<tool_call>not a call</tool_call>"
        '<tool_call>{"name": "transfer_to_human", "arguments": {"reason_type": complaint}}</tool_call>'
        '<invoke name="transfer_to_human"><parameter name="summary">x</invoke>'
    )
    agent = h.agent("written-bad", [text(written), text("Sorry, I couldn't do that.")])
    run = h.run(agent, "help")
    assert refusals(h, run["id"]) == [
        ("delete_account", "tool_not_available"),
        (UNREADABLE_CALL_NAME, "tool_not_available"),
        ("transfer_to_human", "invalid_arguments"),
        ("transfer_to_human", "invalid_arguments"),
    ]
    seen = model_saw(h, "written-bad")
    assert [s["error"]["code"] for s in seen] == [
        "tool_not_available",
        "tool_not_available",
        "invalid_arguments",
        "invalid_arguments",
    ]
    assert "transfer_to_human" in seen[1]["error"]["guidance"]  # what is offered, to write it again
    assert not Handoff.objects.exists()
    assert h.steps(run["id"])[0]["model_call"]["text"] == "Working on it. "
    assert run["output"]["text"] == "Sorry, I couldn't do that."


def test_written_calls_past_five_in_a_round_are_refused_as_native_ones_are(h):
    blocks = "".join(
        "<tool_call>"
        + json.dumps({"name": "transfer_to_human", "arguments": {"reason_type": "complaint", "summary": f"s{n}"}})
        + "</tool_call>"
        for n in range(12)
    )
    agent = h.agent("written-many", [text(blocks), text("The team has it.")], tools={"max_tool_rounds": 1})
    run = h.run(agent)
    codes = [code for _, code in refusals(h, run["id"])]
    assert codes == [None] * 5 + ["too_many_calls"] * 5  # ten read; the last two removed, never run
    assert Handoff.objects.count() == 5
    assert run["output"]["text"] == "The team has it."


def test_native_calls_win_over_blocks_written_beside_them(h):
    beside = f"On it. <tool_call>{HANDOFF_BLOCK}</tool_call>"
    agent = h.agent(
        "written-beside",
        [calls(("transfer_to_human", HANDOFF_ARGUMENTS), text=beside), text("Someone will continue here.")],
    )
    run = h.run(agent, "my parcel is broken")
    [call] = h.tool_steps(run["id"])
    assert call["status"] == "succeeded" and Handoff.objects.count() == 1
    step = h.steps(run["id"])[0]["model_call"]
    assert step["text"] == "On it. " and "tool_calls_written_as_text" not in step
    assert not call_id(run).startswith("call_text_")  # the native call's own id
    no_block_in(run, h.steps(run["id"]))


def test_a_final_answer_with_a_block_after_the_last_round_shows_only_its_text(h):
    agent = h.agent(
        "written-late",
        [text(ASKING), text(ASKING.replace("damaged", "lost")), text(f"Here is what I can say.{ORDER_BLOCK}")],
        tools={"max_tool_rounds": 1},
    )
    run = h.run(agent, "my parcel is broken")
    assert run["status"] == "completed"
    # Round 1 ran the handoff; round 2 was refused (no rounds left); the answer after it runs nothing.
    assert refusals(h, run["id"]) == [("transfer_to_human", None), ("transfer_to_human", "round_budget_exhausted")]
    assert run["output"]["text"] == "Here is what I can say."
    assert Handoff.objects.count() == 1


def test_the_demo_models_echo_is_never_a_call(h):
    # The demo echoes the customer's words: a block the customer typed is not the model's call, and is not shown.
    agent = h.agent("written-demo", model={"provider": "demo"}, tools={"enabled": False})
    typed = f"<tool_call>{HANDOFF_BLOCK}</tool_call> hello"
    run = h.run(agent, typed)
    assert run["status"] == "completed" and run["rounds"] == 0
    assert not ToolCall.objects.exists()
    assert run["output"]["text"].startswith("(Demo model)") and "hello" in run["output"]["text"]
    no_block_in(run["output"], h.steps(run["id"]))


def test_the_runs_inspector_says_the_calls_came_as_text_and_shows_no_block(h):
    from tests.dashboard.test_pages import signed_in

    agent = h.agent("written-page", [text(ASKING), text("Someone will continue here.")])
    run = h.run(agent, "my parcel is broken")
    page = signed_in(h.tenant).get(f"/runs/{run['id']}/").content.decode()
    assert "calls written as text" in page and "transfer_to_human" in page
    assert "tool_call&gt;" not in page and "<tool_call" not in page
