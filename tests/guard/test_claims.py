"""What an answer claims, decided by where each fact came from (guard/claims.py): references and figures need a
source, an action said to be done needs the call that did it."""

from __future__ import annotations

import time

import pytest

import guard
from guard import UNBACKED_ACTION, UNCHECKED, UNGROUNDED_FIGURE, UNGROUNDED_REFERENCE, check
from tests.guard.conftest import call, facts, kinds

# --- the misses the issue found (an agent with create_ticket and an action HTTP tool; the model called nothing) --

REGRESSIONS = {
    "Your ticket number is **48213**.": UNGROUNDED_REFERENCE,
    "- **Ticket:** 48213": UNGROUNDED_REFERENCE,
    "Your ticket ID `48213` is open.": UNGROUNDED_REFERENCE,
    "_TKT-1234_": UNGROUNDED_REFERENCE,
    "I have **cancelled** your order.": UNBACKED_ACTION,
    "I've\ncancelled your order and refunded you.": UNBACKED_ACTION,
    "I've\u2028cancelled your order and refunded you.": UNBACKED_ACTION,
    "I've\u200ccancelled your order and refunded you.": UNBACKED_ACTION,
    "I've cancelled your order, so you can't be charged again.": UNBACKED_ACTION,
    "Your order was cancelled.": UNBACKED_ACTION,
    "Your refund is done.": UNBACKED_ACTION,
    "تـم إلغاء طلبك": UNBACKED_ACTION,
    "تـم تحويل محادثتك": UNBACKED_ACTION,
    "رقم التـذكرة 48213": UNGROUNDED_REFERENCE,
    "Votre commande a été annulée.": UNBACKED_ACTION,
    "Su pedido ha sido cancelado.": UNBACKED_ACTION,
    "Ihre Bestellung wurde storniert.": UNBACKED_ACTION,
    "Seu pedido foi cancelado.": UNBACKED_ACTION,
    "Siparişiniz iptal edildi.": UNBACKED_ACTION,
    "आपका ऑर्डर रद्द कर दिया गया है।": UNBACKED_ACTION,
    "Pesanan Anda sudah dibatalkan.": UNBACKED_ACTION,
    "Il suo ordine è stato annullato.": UNBACKED_ACTION,
    "Uw bestelling is geannuleerd.": UNBACKED_ACTION,
    "آپ کا آرڈر منسوخ کر دیا گیا ہے۔": UNBACKED_ACTION,
}


@pytest.mark.parametrize(("answer", "kind"), REGRESSIONS.items())
def test_the_issues_misses_are_claims(answer, kind):
    assert kind in kinds(check(answer, facts())), answer


# --- honest answers ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "Would you like me to cancel your order?",
        "I can open a ticket for you if you'd like.",
        "I can transfer you to a colleague if you prefer.",
        "Has your order been cancelled already?",
        "If your order has already been cancelled, you don't need to do anything.",
        "Once the refund is processed, you'll get an email.",
        "Your order has not been cancelled yet.",
        "I haven't changed anything on your account.",
        "I couldn't cancel your order because the system returned an error.",
        "Unfortunately the cancellation failed. Please try again later.",
        "Nobody could approve the refund in time, so it was not done.",
        "Hello! How can I help you today?",
        "I'm sorry to hear that, let me look into it.",
        "Refunds are processed within the time shown on your receipt.",
        "I've transferred nothing yet: I couldn't reach the team.",
        "The courier will contact you before delivery.",
        "If you email support@example.com, our team will get back to you.",
        "We've updated our opening hours for Ramadan.",
        "لم أتمكن من إلغاء طلبك",
        "وإذا تم إلغاء طلبك، ستصلك رسالة.",
        "هل تريد أن ألغي طلبك؟",
        "تحولت حالة طلبك إلى قيد الشحن",
    ],
)
def test_honest_answers_pass(answer):
    assert check(answer, facts(call("cancel_order", ok=False))) == [], answer


def test_negation_and_admission_scope_to_their_own_clause():
    assert kinds(check("I couldn't reach the warehouse. But I've cancelled your order.", facts())) == {UNBACKED_ACTION}
    assert kinds(check("I've cancelled your order; the refund hasn't been processed yet.", facts())) == {
        UNBACKED_ACTION
    }
    assert check("The refund hasn't been processed yet.", facts()) == []


# --- what backs an action ---------------------------------------------------------------------------------------


def test_an_action_is_backed_by_a_succeeded_call_of_a_matching_effect():
    cancelled = facts(call("cancel_order", result={"ok": True, "data": {"status": "cancelled"}}))
    assert check("I've cancelled your order.", cancelled) == []
    assert check("I've cancelled your order.", facts(call("order_status", effect="read"))) != []
    assert check("I've cancelled your order.", facts(call("cancel_order", ok=False))) != []
    # A succeeded update_address doesn't back a refund, by its name.
    address = facts(call("update_address"))
    assert check("I've updated your address.", address) == []
    assert kinds(check("I've updated your address and refunded the shipping.", address)) == {UNBACKED_ACTION}
    # A tool whose name says nothing backs every action.
    assert check("I've refunded the shipping.", facts(call("do_the_thing"))) == []


def test_a_lookup_that_reports_the_action_backs_saying_it_back():
    looked_up = facts(call("order_status", effect="read", result={"ok": True, "data": {"status": "Cancelled"}}))
    assert check("Your order was cancelled.", looked_up) == []
    failed = facts(call("cancel_order", ok=False, result={"ok": False, "error": "could not be cancelled"}))
    assert check("Your order was cancelled.", failed) != []


def test_right_after_a_failed_call_an_action_is_a_claim_whatever_succeeded_before():
    answer = "Done! Your order is cancelled."
    assert check(answer, facts(call("cancel_order"), call("cancel_order", ok=False))) != []
    assert check(answer, facts(call("cancel_order", ok=False), call("cancel_order"))) == []


def test_handoffs_tickets_and_follow_ups_need_their_own_calls():
    for answer in ["I've transferred you to our team.", "تم تحويلك إلى فريق الدعم", "A human agent will join shortly."]:
        assert kinds(check(answer, facts())) == {UNBACKED_ACTION}, answer
        assert check(answer, facts(call("transfer_to_human", effect="escalation"))) == [], answer
        assert check(answer, facts(handed_off=True)) == [], answer
    ticket = facts(call("create_ticket", result={"ok": True, "ticket": {"number": "TKT-12"}}))
    assert check("I've opened a ticket for you: TKT-12.", ticket) == []
    assert check("I've opened a ticket for you.", facts(call("transfer_to_human", effect="escalation"))) != []
    assert check("Our support team will contact you shortly.", ticket) == []
    assert check("Our support team will contact you shortly.", facts()) != []


def test_the_segments_earlier_calls_back_a_later_answer():
    earlier = (call("cancel_order"),)
    assert check("Yes, your order was cancelled.", facts(earlier=earlier)) == []
    assert check("Yes, your order was cancelled.", facts()) != []


# --- references and figures -------------------------------------------------------------------------------------


def test_a_reference_must_come_from_a_source():
    assert check("Let me look up order 8812 for you.", facts(customer=("where is order 8812?",))) == []
    assert kinds(check("Let me look up order 8812 for you.", facts())) == {UNGROUNDED_REFERENCE}
    result = {"ok": True, "data": {"rows": [{"Order": "8812", "Tracking": "1Z999AA1"}]}}
    assert check("Your tracking code is 1Z999AA1.", facts(call("order_status", effect="read", result=result))) == []
    assert kinds(check("Your tracking code is 1Z999AA2.", facts(call("order_status", "read", result=result)))) == {
        UNGROUNDED_REFERENCE
    }
    assert kinds(check("Your booking code is A1B2C3.", facts())) == {UNGROUNDED_REFERENCE}
    assert kinds(check("Ref #4471 is open.", facts())) == {UNGROUNDED_REFERENCE}


def test_a_ticket_number_must_come_from_a_ticket_source():
    assert check("Your ticket TKT-456 is open.", facts(tickets=frozenset({"TKT-456"}))) == []
    assert check("Your ticket \u0422\u041a\u0422\u2011\u0664\u0665\u0666 is open.", facts(tickets={"TKT-456"})) == []
    helpdesk = call("my_tickets", effect="read", result={"ok": True, "data": {"rows": [{"Ticket": "4521"}]}})
    assert check("Your ticket number is 4521.", facts(helpdesk)) == []
    order = call("order_status", effect="read", result={"ok": True, "data": {"order_id": 48213}})
    assert kinds(check("Your ticket number is 48213.", facts(order))) == {UNGROUNDED_REFERENCE}
    assert check("Your order 48213 is delayed.", facts(order)) == []


@pytest.mark.parametrize(
    ("answer", "source"),
    [
        ("Refunds are accepted within thirty days.", "Refunds: within 30 days of delivery."),
        ("Refunds are accepted within 30 days.", "Refunds are accepted within thirty days."),
        ("يمكنك الإرجاع خلال ٣٠ يومًا.", "Returns within 30 days."),
        ("The total is 1.299,00 €.", "Total: EUR 1299"),
        ("The total is $1,299.00.", "Total: 1299"),
        ("We're open until 5pm.", "Hours: 9:00-17:00"),
        ("It arrives on December 9.", "eta 2026-12-09"),
        ("Shipping is 15% off this week.", "Promotion: 15% off shipping"),
        ("You have 2 open orders.", None),
    ],
)
def test_figures_are_compared_as_values(answer, source):
    if source is None:
        grounded = facts(call("orders", effect="read", result={"ok": True, "data": {"rows": [{"a": "x"}, {"a": "y"}]}}))
    else:
        grounded = facts(instructions=source)
    assert check(answer, grounded) == [], answer
    assert UNGROUNDED_FIGURE in kinds(check(answer, facts())), answer


def test_an_invented_policy_figure_is_a_claim():
    policy = facts(call("search_knowledge", effect="read", result={"ok": True, "passage": "Refunds within 30 days."}))
    assert check("Refunds are accepted within 30 days.", policy) == []
    assert kinds(check("Refunds are accepted within 60 days.", policy)) == {UNGROUNDED_FIGURE}


def test_a_passage_is_a_source_of_figures_never_of_actions_done():
    passage = {"ok": True, "passage": "Orders can be cancelled within 24 hours. A cancelled order is refunded."}
    assert check("I've cancelled your order.", facts(call("search_knowledge", effect="read", result=passage))) != []


def test_numbers_in_a_question_state_no_figure():
    assert check("Is it the order you placed 3 days ago?", facts()) == []
    assert check("Could you share the 5-digit code from the email?", facts()) == []


def test_numbers_the_customer_typed_pass():
    said = facts(customer=("I was charged 89.90 instead of 79.90 on order ٨٨١٢",))
    assert check("You were charged $89.90 instead of $79.90 on order 8812 — let me check.", said) == []


def test_links_and_structural_numbers_are_not_figures():
    assert check("See https://shop.example/help/30-day-returns for step 2.", facts()) == []


# --- hostile answers --------------------------------------------------------------------------------------------

HOSTILE = {
    "ticket + spaces": "ticket" + " " * 300 + "x",
    "ticket number + zeros": "ticket number is " + "0" * 50_000 + "x",
    "TKT- + digits + letter": ("TKT-" + "1" * 5_000 + "x ") * 10,
    "a + spaces": "a" + " " * 50_000 + "x",
    "I have + adverbs": "I have " + "just " * 20_000 + "x",
    "many short sentences": "I've done it. " * 20_000,
    "newlines": "ticket\n" * 50_000,
    "zero-width spaces": "ticket" + "\u200b" * 100_000 + " 4471",
    "one long Arabic word": "تذكرة" * 20_000,
    "combining marks": "T" + "\u0301" * 100_000 + "KT-1",
    "ligature expansions": "\ufdfa" * 20_000,
    "gaps": "opened " * 30_000 + "ticket",
    "markdown": "**a** _b_ `c` [d](e) " * 20_000,
    "tags and entities": "<b>&#52;" * 30_000,
    "brackets": "[" * 50_000 + "](" * 50_000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_answer_is_checked_within_two_seconds(name):
    started = time.monotonic()
    claims = check(HOSTILE[name], facts())
    assert time.monotonic() - started < 2, name
    assert all(len(claim.text) <= 160 for claim in claims)


def test_an_answer_that_cannot_be_read_in_time_is_a_claim_not_a_pass(monkeypatch):
    monkeypatch.setattr(guard.stream, "CHECK_BUDGET_S", 0.0)
    assert [claim.kind for claim in check("Hello there. How are you?", facts())] == [UNCHECKED]
