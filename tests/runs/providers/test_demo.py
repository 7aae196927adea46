"""The offline demo model, through `complete`."""

from __future__ import annotations

import json
import time

from runs import providers
from runs.llm import Message, ToolCallRequest, ToolDefinition
from tests.runs.providers.conftest import ORDER_STATUS, TICKET, TRANSFER, make_request, only_call, user

DEMO = {"provider": "demo"}
TRACK = ToolDefinition(
    name="track_shipment",
    description="تتبع الشحنة برقم الطلب",
    parameters={
        "type": "object",
        "properties": {"order_number": {"type": "string", "pattern": "^[0-9]{4,10}$"}},
        "required": ["order_number"],
    },
)


def test_demo_picks_the_tool_the_words_match_and_fills_its_arguments() -> None:
    response = providers.complete(make_request(DEMO, [user("Where is my order 8812?")], tools=(ORDER_STATUS, TRANSFER)))

    assert only_call(response) == ("order_status", {"order_number": "8812"})
    assert response.text == ""
    assert response.model_name == "demo"


def test_demo_fills_enums_from_the_message_or_takes_the_first() -> None:
    tools = (ORDER_STATUS, TICKET, TRANSFER)
    complaint = "I have a complaint, connect me to a human"
    asked = providers.complete(make_request(DEMO, [user("Let me talk to a human")], tools=tools))
    with_complaint = providers.complete(make_request(DEMO, [user(complaint)], tools=tools))

    assert only_call(asked) == (
        "transfer_to_human",
        {"reason_type": "customer_requested", "summary": "Let me talk to a human"},
    )
    assert only_call(with_complaint) == ("transfer_to_human", {"reason_type": "complaint", "summary": complaint})


def test_demo_fills_required_strings_and_only_clear_optional_ones() -> None:
    message = "Please open a ticket, it is urgent: the parcel for order 8812 arrived damaged " + "and broken " * 20
    response = providers.complete(make_request(DEMO, [user(message)], tools=(ORDER_STATUS, TICKET, TRANSFER)))

    name, args = only_call(response)
    assert name == "create_ticket"
    normalized = " ".join(message.split())
    assert args == {"title": normalized[:120], "description": normalized, "priority": "urgent"}


def test_demo_reads_arabic() -> None:
    response = providers.complete(make_request(DEMO, [user("أريد تتبع الشحنة رقم ٨٨١٢")], tools=(TRACK, TRANSFER)))

    assert only_call(response) == ("track_shipment", {"order_number": "8812"})


def test_demo_small_talk_calls_no_tool_and_says_it_is_a_demo() -> None:
    for words in ("Hello! How are you today?", "thanks", "مرحبا"):
        response = providers.complete(make_request(DEMO, [user(words)]))
        assert response.tool_calls == ()
        assert response.text.startswith("(Demo model)")
        assert "demo model" in response.text


def test_demo_with_tools_disabled_answers_in_text() -> None:
    response = providers.complete(make_request(DEMO, [user("Where is my order 8812?")], tool_choice="none"))

    assert response.tool_calls == ()
    assert response.text.startswith("(Demo model)")


def test_demo_summarizes_a_result_and_calls_at_most_one_tool_per_turn() -> None:
    conversation = [
        user("Where is my order 8812?"),
        Message(
            role="assistant",
            tool_calls=(ToolCallRequest(id="c1", name="order_status", arguments='{"order_number": "8812"}'),),
        ),
        Message(
            role="tool",
            tool_call_id="c1",
            name="order_status",
            content='{"ok": true, "data": {"status": "shipped", "eta": "2026-01-02"}}',
        ),
    ]

    response = providers.complete(make_request(DEMO, conversation))

    assert response.tool_calls == ()  # the user's words still match order_status, but this turn already called it
    assert response.text == "(Demo model) The order_status tool answered: status: shipped; eta: 2026-01-02."


def test_demo_says_a_failed_tool_failed() -> None:
    conversation = [
        user("Please open a ticket: my parcel arrived damaged"),
        Message(role="assistant", tool_calls=(ToolCallRequest(id="c1", name="create_ticket", arguments="{}"),)),
        Message(
            role="tool",
            tool_call_id="c1",
            name="create_ticket",
            content=json.dumps(
                {"ok": False, "error": {"code": "rate_limited", "guidance": "Too many tickets today; try tomorrow."}}
            ),
        ),
    ]

    response = providers.complete(make_request(DEMO, conversation, tools=(TICKET,)))

    assert response.text.startswith("(Demo model)")
    assert "did not work (rate_limited)" in response.text
    assert "can't confirm" in response.text
    assert "TKT-" not in response.text and "opened" not in response.text


def test_demo_marks_a_simulated_action() -> None:
    conversation = [
        user("open a ticket"),
        Message(role="assistant", tool_calls=(ToolCallRequest(id="c1", name="create_ticket", arguments="{}"),)),
        Message(role="tool", tool_call_id="c1", name="create_ticket", content='{"ok": true, "simulated": true}'),
    ]

    response = providers.complete(make_request(DEMO, conversation, tools=(TICKET,)))

    assert (
        response.text == "(Demo model) The create_ticket tool answered (simulated: nothing was sent) with no details."
    )


def test_demo_is_deterministic_and_ignores_tool_order() -> None:
    request = make_request(
        DEMO, [user("I want a human, my order 8812 is late")], tools=(ORDER_STATUS, TICKET, TRANSFER)
    )
    reordered = make_request(DEMO, list(request.messages), tools=(TRANSFER, TICKET, ORDER_STATUS))

    first = providers.complete(request)

    assert providers.complete(request) == first
    assert providers.complete(reordered) == first
    assert first.usage.input_tokens == len(request.system.split()) + len(request.messages[0].content.split())
    assert first.usage.output_tokens > 0


def test_demo_does_not_run_a_catastrophic_tenant_pattern() -> None:
    # A tenant's HTTP tool schema may hold any pattern; matching it against the user's words must stay fast.
    evil = ToolDefinition(
        name="lookup_code",
        description="Look up a code.",
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}},
            "required": ["code"],
        },
    )
    started = time.monotonic()

    response = providers.complete(make_request(DEMO, [user("lookup code " + "a" * 39 + "b")], tools=(evil,)))

    assert time.monotonic() - started < 1
    assert only_call(response)[0] == "lookup_code"


CONTACT = ToolDefinition(
    name="update_contact_email",
    description="Update the contact email of the customer.",
    parameters={
        "type": "object",
        "properties": {"email": {"type": "string", "format": "email"}},
        "required": ["email"],
    },
)


def test_demo_finds_an_email_in_the_words() -> None:
    for words, email in [
        ("update contact email to sara@example.com please", "sara@example.com"),
        ("update contact email <sara.k@mail.example.co.uk>", "sara.k@mail.example.co.uk"),
        ("update contact email a@b@c.example.org", "b@c.example.org"),
    ]:
        response = providers.complete(make_request(DEMO, [user(words)], tools=(CONTACT,)))
        assert only_call(response) == ("update_contact_email", {"email": email}), words


def test_demo_reads_hostile_words_for_an_email_in_linear_time() -> None:
    # Issue #13, finding 6: the email expression was quadratic on a run without an @ (3.3 s on 20 kB).
    for hostile in ("a" * 50_000, "a@" + "b" * 50_000, "a@" + "b." * 25_000, ("x" * 100 + "@") * 500):
        started = time.monotonic()
        providers.complete(make_request(DEMO, [user("update contact email " + hostile)], tools=(CONTACT,)))
        assert time.monotonic() - started < 2


def test_demo_runs_a_tenant_pattern_with_a_time_limit() -> None:
    # Catastrophic for the regex module too, and no quantified group for a heuristic to spot.
    slow = ToolDefinition(
        name="lookup_code",
        description="Look up a code.",
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^(?:a|aa)+$|^(?:a|a?)+b$"}},
            "required": ["code"],
        },
    )
    started = time.monotonic()
    response = providers.complete(
        make_request(DEMO, [user("lookup code " + " ".join(["a" * 39 + "c"] * 50))], tools=(slow,))
    )
    assert time.monotonic() - started < 2
    assert only_call(response)[0] == "lookup_code"
