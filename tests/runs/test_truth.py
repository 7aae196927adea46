"""The truthfulness guard on its own: claims no tool produced are caught, honest answers pass."""

from __future__ import annotations

import pytest

from runs.truth import RunFacts, unverified_claims


def facts(tickets=(), handoff=False, any_success=False, last_failed=None):
    return RunFacts(lambda: frozenset(tickets), lambda: handoff, any_success, last_failed)


@pytest.mark.parametrize(
    "text",
    [
        "I've opened ticket TKT-99 for you.",
        "Your ticket number is 4471.",
        "Your ticket ID 4471 is being handled.",
        "Ticket #4471 is open.",
        "رقم التذكرة 4471",
        "تم فتح تذكرة رقم ٤٤٧١ لك",
        "Your ticket is TKT-0099.",
    ],
)
def test_ticket_numbers_no_tool_produced(text):
    assert any(claim.startswith("ticket") for claim in unverified_claims(text, facts(tickets={"TKT-1"})))


@pytest.mark.parametrize(
    "text",
    [
        "Your ticket TKT-456 is open.",
        "Your ticket TKT-0456 is open.",
        "Your ticket TKT-٤٥٦ is open.",
        "Your ticket number is 456.",
        "Your order (reference #8812) has shipped.",
        "Booking reference no. 55231 is confirmed by the airline.",
    ],
)
def test_real_ticket_numbers_and_other_references_pass(text):
    assert [
        c for c in unverified_claims(text, facts(tickets={"TKT-456"}, any_success=True)) if c.startswith("ticket")
    ] == []


@pytest.mark.parametrize(
    "text",
    [
        "I've transferred you to our team.",
        "Sorry about that. I've transferred you to our team.",
        "I'm transferring you now.",
        "Your request has been escalated.",
        "A human agent will join shortly.",
        "تم تحويلك إلى فريق الدعم",
        "تم تصعيد طلبك",
        "تم نقل محادثتك إلى الفريق",
        "سيتواصل معك أحد ممثلي خدمة العملاء",
    ],
)
def test_handoffs_no_tool_made(text):
    assert "handoff to the team" in unverified_claims(text, facts())


@pytest.mark.parametrize(
    "text",
    [
        "We are connecting flights in Dubai.",
        "تحولت حالة طلبك إلى قيد الشحن",
        "I couldn't transfer you to the team, sorry.",
        "I wasn't able to connect you with an agent.",
    ],
)
def test_honest_or_unrelated_words_are_not_handoff_claims(text):
    assert "handoff to the team" not in unverified_claims(text, facts())


def test_a_handoff_that_exists_is_no_claim():
    assert unverified_claims("I've transferred you to our team.", facts(handoff=True)) == []


@pytest.mark.parametrize(
    "text",
    [
        "Done! All set.",
        "No problem! I've cancelled your order.",
        "Your order has been successfully cancelled - sorry for the trouble.",
        "I've gone ahead and cancelled it.",
        "تم الإلغاء بنجاح",
    ],
)
def test_success_after_a_failed_call(text):
    assert unverified_claims(text, facts(last_failed="cancel_order")) == ["success right after cancel_order failed"]


@pytest.mark.parametrize(
    "text",
    [
        "I couldn't cancel your order: the system didn't respond.",
        "Unfortunately the cancellation failed. Please try again later.",
        "لم أتمكن من إلغاء طلبك",
    ],
)
def test_honest_admissions_pass(text):
    assert unverified_claims(text, facts(last_failed="cancel_order")) == []


def test_admission_counts_only_in_its_own_sentence():
    text = "I couldn't reach the warehouse. But I've cancelled your order."
    assert unverified_claims(text, facts(last_failed="cancel_order")) == ["success right after cancel_order failed"]


@pytest.mark.parametrize("text", ["I've cancelled your order.", "Your booking has been rescheduled.", "تم تأكيد طلبك"])
def test_an_action_claimed_with_no_tool_at_all(text):
    [claim] = unverified_claims(text, facts())
    assert claim.startswith("action claimed without a tool")


@pytest.mark.parametrize(
    "text",
    ["Your order was placed on Monday and was shipped today.", "The parcel has been forwarded to the local courier."],
)
def test_relaying_a_lookup_is_not_an_action_claim(text):
    assert unverified_claims(text, facts(any_success=True)) == []


# --- Hostile answers: the guard reads a model's text, which anyone can steer (issue #13, finding 1) ---------------

# Each took seconds to minutes with the old patterns (ticket + spaces: 26 s at 300 spaces; the others quadratic).
HOSTILE_ANSWERS = {
    "ticket + spaces": "ticket" + " " * 300 + "x",
    "ticket + tabs and spaces": "ticket" + " \t" * 5_000 + "x",
    "ticket number + zeros": "ticket number is " + "0" * 50_000 + "x",
    "TKT + zeros": "TKT" + "0" * 50_000 + "x",
    "TKT- + digits + letter": ("TKT-" + "1" * 5_000 + "x ") * 10,
    "a + spaces (handoff)": "a" + " " * 50_000 + "x",
    "our + spaces + agent": "our " + " " * 50_000 + "agents",
    "I have + adverbs": "I have " + "just " * 20_000 + "x",
    "you + spaces (handoff)": "you" + " " * 50_000 + "x",
    "has + spaces (change)": "has" + " " * 50_000 + "been",
    "Arabic ticket + spaces": "تذكرة" + " " * 50_000 + "x",
    "Arabic number + spaces": "رقم" + " " * 50_000 + "تذكرة" + " " * 50_000 + "x",
    "many short sentences": "I've done it. " * 20_000,
    "newlines": "ticket\n" * 50_000,
    "mixed": ("ticket # TKT-0 your ticket number is 12. I have just gone ahead and " + " " * 500) * 200,
}


@pytest.mark.parametrize("name", sorted(HOSTILE_ANSWERS))
def test_a_hostile_answer_is_checked_within_two_seconds(name):
    import time

    started = time.monotonic()
    unverified_claims(HOSTILE_ANSWERS[name], facts())
    assert time.monotonic() - started < 2, name


def test_the_guard_still_finds_claims_spread_over_whitespace():
    # Whitespace of any length between the words still reads as one claim.
    assert unverified_claims("Your ticket   number\tis\u00a0  4471.", facts()) == ["ticket 4471"]
    assert unverified_claims("I   have\t\tjust   cancelled your order.", facts())[0].startswith(
        "action claimed without a tool"
    )
    assert "ticket TKT-5" in unverified_claims("Your ticket is TKT-" + "0" * 5_000 + "5.", facts())


def test_an_answer_that_cannot_be_read_in_time_is_a_claim_not_a_pass(monkeypatch):
    from runs import truth

    monkeypatch.setattr(truth, "CHECK_BUDGET_S", 0.0)
    assert unverified_claims("I've opened ticket TKT-99 for you.", facts()) == [truth.UNCHECKED_CLAIM]


def test_a_huge_ticket_number_is_a_claim_not_a_crash():
    # int() refuses more than 4,300 digits: the number is compared as text.
    [claim] = unverified_claims("Your ticket is TKT-" + "7" * 6_000 + ".", facts(tickets={"TKT-7"}))
    assert claim.startswith("ticket TKT-77777") and len(claim) < 40


@pytest.mark.django_db
def test_a_run_whose_model_answers_hostile_text_finishes_in_seconds(h):
    import time

    from fakes.llm import text

    hostile = "ticket" + " " * 300 + "x " + "a" + " " * 50_000 + "x"
    agent = h.agent("hostile-answer", [text(hostile)] * 3)
    started = time.monotonic()
    run = h.run(agent)
    assert run["status"] == "completed", run
    assert time.monotonic() - started < 10
