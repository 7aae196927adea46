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
