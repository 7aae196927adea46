"""The truthfulness guard on the phrasings real models write: confirmations no tool produced (curly apostrophes,
Arabic's attached conjunctions and suffixed forms, everyday promises), and honest answers it must let through
(conditions, the business speaking of itself, numbers a tool returned)."""

from __future__ import annotations

import pytest

from fakes.llm import calls, text
from runs.truth import RunFacts, ticket_numbers_in, unverified_claims
from tests.runs.conftest import VERIFIED


def facts(tickets=(), handoff=False, any_success=False, last_failed=None, ticket_made=False):
    return RunFacts(lambda: frozenset(tickets), lambda: handoff, any_success, last_failed, ticket_made)


# 1. Typographic apostrophes: models often write "I’ve" (U+2019), read as "I've".
@pytest.mark.parametrize(
    "answer",
    ["I’ve transferred you to our team.", "We’ve escalated your case to a specialist.", "I’m transferring you now."],
)
def test_curly_apostrophe_handoff_claim_is_caught(answer):
    assert "handoff to the team" in unverified_claims(answer, facts())


def test_curly_apostrophe_action_claim_is_caught():
    assert unverified_claims("I’ve cancelled your order.", facts()) != []


def test_curly_apostrophe_success_after_failure_is_caught():
    assert unverified_claims("No problem! I’ve cancelled your order.", facts(last_failed="cancel_order")) != []


# 2. Arabic: the conjunction و / ف is written attached to the next word ("وتم تحويل"), so the look-behind
#    (no Arabic letter before) must still let the most common way to continue a sentence be read.
@pytest.mark.parametrize(
    "answer",
    ["شكراً لصبرك، وتم تحويل محادثتك إلى فريق الدعم.", "وسيتواصل معك أحد موظفينا قريباً.", "فتم تصعيد طلبك."],
)
def test_arabic_handoff_after_attached_conjunction_is_caught(answer):
    assert "handoff to the team" in unverified_claims(answer, facts())


def test_arabic_action_after_attached_conjunction_is_caught():
    assert unverified_claims("شكراً لك، وتم إلغاء طلبك.", facts()) != []


# 3. Arabic "your ticket" is تذكرتك (ة becomes ت before a suffix).
@pytest.mark.parametrize("answer", ["رقم تذكرتك هو 4521", "تذكرتك رقم 4521 مفتوحة الآن."])
def test_arabic_your_ticket_number_is_caught(answer):
    assert any(c.startswith("ticket") for c in unverified_claims(answer, facts()))


# 4. Everyday English handoff promises.
@pytest.mark.parametrize(
    "answer",
    [
        "Our support team will contact you shortly.",
        "Someone from our team will be in touch within 24 hours.",
        "A member of our team will get back to you soon.",
    ],
)
def test_everyday_handoff_promises_are_caught(answer):
    assert "the team's follow-up, with no ticket or handoff" in unverified_claims(answer, facts())
    # True once a ticket was opened or the conversation handed over.
    assert unverified_claims(answer, facts(any_success=True, ticket_made=True)) == []
    assert unverified_claims(answer, facts(any_success=True, handoff=True)) == []


# 5. Everyday English ticket confirmations without a number.
@pytest.mark.parametrize(
    "answer",
    ["I've raised a ticket for you.", "I have logged a complaint on your behalf.", "I've filed a support request."],
)
def test_everyday_ticket_confirmations_are_caught(answer):
    assert unverified_claims(answer, facts()) != []


# 6. End to end: create_ticket is refused, another tool of the same round succeeds, and the answer says the ticket
#    was opened: a claim, since another tool's success doesn't make a ticket.
@pytest.mark.django_db
def test_ticket_claim_after_refused_create_ticket_and_a_successful_handoff(h):
    agent = h.agent(
        "ticket-mixed",
        [
            calls(
                ("create_ticket", {"title": "Broken blender"}),  # no description: refused, invalid_arguments
                ("transfer_to_human", {"reason_type": "complaint", "summary": "Broken blender"}),
            ),
        ]
        + [text("I've opened a ticket for your broken blender and passed you to our team.")] * 3,
        tools={"builtin": {"create_ticket": {"enabled": True}}},
    )
    session = h.session(agent, **VERIFIED)
    run = h.run(agent, "my blender arrived broken", session=session, **VERIFIED)
    assert run["status"] == "completed", run
    codes = [(c["name"], c["status"]) for c in h.tool_steps(run["id"])]
    assert ("create_ticket", "refused") in codes, codes
    from desk.models import Ticket

    assert not Ticket.objects.exists()
    assert run["output"]["unverified_claims"] != [], run["output"]


# 7. The business's own helpdesk, reached through an HTTP tool, returns its ticket number; the model repeats it
#    faithfully: not a claim (a number a tool returned is real, not only create_ticket's TKT-<n>).
@pytest.mark.django_db
def test_a_ticket_number_an_http_tool_returned_is_not_an_unverified_claim(h, upstream, egress_settings):
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
    answer = "Your ticket number is 4521 and it is in progress."
    agent = h.agent(
        "helpdesk",
        [calls(("my_tickets", {"order_number": "8812"})), text(answer), text(answer), text(answer)],
        tools={"http": [{"tool": "my_tickets"}]},
    )
    run = h.run(agent, "any news on my ticket?", **VERIFIED)
    assert run["status"] == "completed", run
    [call] = h.tool_steps(run["id"])
    assert call["shown_to_model"]["data"]["rows"] == [{"Ticket": "4521", "State": "in progress"}]
    assert run["output"]["unverified_claims"] == []
    assert len(h.fake.requests("helpdesk")) == 2  # no push-back


# 8. Honest answers are not claims (a false positive is pushed back twice, then shown as unconfirmed).
@pytest.mark.parametrize("answer", ["I’m sorry, I wasn’t able to get that done.", "Sorry, I couldn’t get this done."])
def test_curly_apostrophe_admission_after_a_failure_is_accepted(answer):
    assert unverified_claims(answer, facts(last_failed="cancel_order")) == []


@pytest.mark.parametrize(
    "answer",
    [
        "Nobody could approve the refund in time, so it was not done.",
        "The refund wasn’t done: no one approved it in time.",
        "Your address change has not been processed.",
        "Sorry, it hasn't been taken care of.",
    ],
)
def test_saying_it_was_not_done_after_a_refused_call_is_accepted(answer):
    assert unverified_claims(answer, facts(last_failed="cancel_order")) == []


@pytest.mark.parametrize(
    "answer",
    [
        "It's done: I've cancelled your order.",
        "Your refund has been processed.",
        "تم إلغاء طلبك بنجاح.",
        # A negated "done" elsewhere in the sentence doesn't excuse the claim beside it.
        "Not completed yet but I've cancelled it.",
        "I've cancelled your order; the refund hasn't been processed yet.",
        "تم إلغاء طلبك، ولم يتم خصم أي مبلغ.",
        "Not only is it done, your refund is on its way.",
        "It's done, nothing more is needed.",
    ],
)
def test_a_done_claim_after_a_refused_call_is_still_caught(answer):
    assert unverified_claims(answer, facts(last_failed="cancel_order")) != []


@pytest.mark.parametrize(
    "answer",
    [
        "I've transferred you to our team; the refund hasn't been processed yet.",
        "I've opened a ticket; it was not processed yet.",
    ],
)
def test_a_negated_done_beside_another_claim_leaves_that_claim_caught(answer):
    assert unverified_claims(answer, facts()) != []


@pytest.mark.parametrize(
    "answer",
    [
        "If your order has been cancelled, the refund takes 5 days.",
        "We've updated our opening hours for Ramadan: 8pm to 2am.",
        "وإذا تم إلغاء طلبك، ستصلك رسالة.",  # with its comma: without one the sentence is read whole,
    ],
)
def test_policy_and_faq_answers_without_tools_are_not_action_claims(answer):
    assert unverified_claims(answer, facts()) == []


def bare_facts(any_success=False, ticket_made=False, numbers=frozenset):
    return RunFacts(lambda: frozenset(), lambda: False, any_success, None, ticket_made, numbers)


# 9. "our" after the verb is the business speaking of itself only for its own things (hours, prices...): a change
#    to "our records" for the customer is a claim.
@pytest.mark.parametrize(
    "answer",
    [
        "I've updated our records with your new address.",
        "I have updated our system with your new email address.",
        "I've sent our billing team your refund request.",
    ],
)
def test_invented_change_to_our_records_is_caught(answer):
    assert unverified_claims(answer, bare_facts()) != []


# 10. A condition without its comma is read whole (where it ends can't be told); "once again" is no condition.
@pytest.mark.parametrize(
    "answer",
    [
        "When you check your inbox you'll see that your refund has been processed.",
        "Once again I've cancelled your order.",
    ],
)
def test_claim_in_comma_less_conditional_sentence_is_caught(answer):
    assert unverified_claims(answer, bare_facts()) != []


# 11. A ticket claim is a ticket made, not a mention of one.
def test_honest_lookup_answer_mentioning_no_ticket_needed_passes():
    answer = "I've confirmed your order has shipped, so there's no need to open a ticket."
    assert unverified_claims(answer, bare_facts(any_success=True)) == []


# 12. A number a tool returned backs a ticket number only under a ticket-like key: an order number is not one.
def test_order_number_is_not_a_ticket_number():
    seen = lambda: ticket_numbers_in([{"order_id": 48213, "status": "delayed"}])  # noqa: E731
    claims = unverified_claims("Your ticket number is 48213.", bare_facts(any_success=True, numbers=seen))
    assert any(c.startswith("ticket") for c in claims)
    helpdesk = lambda: ticket_numbers_in([{"data": {"rows": [{"Ticket": "4521"}]}}, {"case_id": 77}])  # noqa: E731
    assert unverified_claims("Your ticket number is 4521.", bare_facts(any_success=True, numbers=helpdesk)) == []


# 13. A follow-up that hangs on the customer acting describes the process; it promises nothing.
@pytest.mark.parametrize(
    "answer",
    [
        "If you email support@example.com with your order number, our team will get back to you within a day.",
        "Once you submit the return form, the team will contact you to arrange a pickup.",
    ],
)
def test_conditional_follow_up_described_honestly_passes(answer):
    assert unverified_claims(answer, bare_facts(any_success=True)) == []
