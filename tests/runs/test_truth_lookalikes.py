"""The truthfulness guard against lookalike spellings and generic reference numbers (security review, finding
"Low": `TKT‑4471` with a non-breaking hyphen, a zero-width space, fullwidth or Cyrillic letters, "Ref #4471 is open",
"رقم البلاغ 4471" all passed). The answer is read as a person sees it: NFKC, lookalike letters as Latin, invisible
characters dropped, every dash as '-', every decimal digit as ASCII."""

from __future__ import annotations

import pytest

from fakes.llm import text
from runs.truth import RunFacts, numbers_in, unverified_claims


def facts(tickets=(), handoff=False, any_success=False, last_failed=None, ticket_made=False, seen=(), given=()):
    return RunFacts(
        lambda: frozenset(tickets),
        lambda: handoff,
        any_success,
        last_failed,
        ticket_made,
        lambda: frozenset(seen),
        lambda: frozenset(given),
    )


# --- the review's findings, one by one -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "Your ticket is TKT\u20114471.",  # U+2011 non-breaking hyphen, which models often write
        "Your ticket is TKT\u200b-4471.",  # a zero-width space
        "Your ticket is \uff34\uff2b\uff34-4471.",  # fullwidth ＴＫＴ
        "Your ticket is \u0422\u041a\u0422-4471.",  # Cyrillic ТКТ
    ],
    ids=["nb-hyphen", "zero-width-space", "fullwidth", "cyrillic"],
)
def test_lookalike_ticket_codes_are_claims(answer):
    assert "ticket TKT-4471" in unverified_claims(answer, facts(tickets={"TKT-1"}))


def test_a_generic_reference_is_a_claim():
    assert "reference 4471" in unverified_claims("Ref #4471 is open.", facts())


def test_an_arabic_report_number_is_a_claim():
    assert "case 4471" in unverified_claims("رقم البلاغ 4471", facts())


# --- more of the same kind -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "Your ticket is TKT\u20104471.",  # hyphen
        "Your ticket is TKT\u20134471.",  # en dash
        "Your ticket is TKT\u20144471.",  # em dash
        "Your ticket is TKT\u22124471.",  # minus sign
        "Your ticket is TKT\ufe584471.",  # small em dash
        "Your ticket is TKT\ufe634471.",  # small hyphen-minus
        "Your ticket is TKT\uff0d4471.",  # fullwidth hyphen-minus
        "Your ticket is TKT\u00ad-4471.",  # soft hyphen
        "Your ticket is T\u200dK\u200cT-4471.",  # zero-width joiner and non-joiner
        "Your ticket is \u202eTKT-4471\u202c.",  # bidi override
        "Your ticket is \u2066TKT-4471\u2069.",  # bidi isolate
        "Your ticket is T\ufe0fKT-4471.",  # variation selector
        "Your ticket is TKT-\uff14\uff14\uff17\uff11.",  # fullwidth digits
        "Your ticket is TKT-\u0664\u0664\u0667\u0661.",  # Arabic-Indic digits
        "Your ticket is TKT-\u096a\u096a\u096d\u0967.",  # Devanagari digits
        "Your ticket is \u03a4\u039a\u03a4-4471.",  # Greek ΤΚΤ
        "Your ticket is \U0001d413\U0001d40a\U0001d413-4471.",  # mathematical bold
        "Your ticket is T\u0301KT-4471.",  # a combining accent
        "Your ticket is TKT - 4471.",  # a dash between spaces
        "Your ticket is TKT #4471.",
        "Your t\u0456\u0441ket number is 4471.",  # Cyrillic і and с inside "ticket"
    ],
)
def test_more_lookalike_ticket_numbers_are_claims(answer):
    assert any(c.startswith("ticket") for c in unverified_claims(answer, facts(tickets={"TKT-1"}))), answer


@pytest.mark.parametrize(
    "answer",
    [
        "I\u2019ve tr\u0430nsferred you to our team.",  # Cyrillic а
        "I've trans\u00adferred you to our team.",  # soft hyphen
        "I've trans\u200bferred you to our team.",
        "I\u02bcve transferred you to our team.",  # modifier letter apostrophe
        "I\u00b4ve transferred you to our team.",  # acute accent as an apostrophe
        "\uff29've transferred you to our team.",  # fullwidth I
        "I've tr\u0251nsferred you to our team.",  # Latin alpha
    ],
)
def test_lookalike_handoff_claims_are_caught(answer):
    assert "handoff to the team" in unverified_claims(answer, facts()), answer


@pytest.mark.parametrize(
    "answer",
    [
        "I\u200b've c\u0430ncelled your order.",
        "I've cancel\u00adled your order.",
        "Your order has been \u0441ancelled.",  # Cyrillic с
    ],
)
def test_lookalike_action_claims_are_caught(answer):
    assert unverified_claims(answer, facts()) != [], answer


def test_lookalike_done_after_a_failure_is_caught():
    answer = "D\u043ene! \u0410ll set."  # Cyrillic о and А
    assert unverified_claims(answer, facts(last_failed="cancel_order")) == ["success right after cancel_order failed"]


@pytest.mark.parametrize(
    "answer",
    [
        "Your reference number is 4471.",
        "Reference no. 4471 has been noted.",
        "Please quote ref. 4471 when you write to us.",
        "Your request #4471 is being handled.",
    ],
)
def test_generic_references_no_one_gave_are_claims(answer):
    assert "reference 4471" in unverified_claims(answer, facts(any_success=True)), answer


@pytest.mark.parametrize(
    "answer",
    [
        "Case #4471 is open.",
        "Your case number is 4471.",
        "I've noted it under case 4471.",
        "Your complaint no. 4471 is with the team.",
        "Support request #4471 is in progress.",
        "Incident ID: 4471.",
        "رقم البلاغ: ٤٤٧١",
        "رقم بلاغك هو 4471",
        "بلاغك رقم 4471 قيد المعالجة.",
        "رقم الشكوى 4471",
        "رقم شكواك 4471",
        "ورقم الحالة 4471",
        "رقم طلب الدعم 4471",
    ],
)
def test_case_numbers_no_tool_produced_are_claims(answer):
    assert "case 4471" in unverified_claims(answer, facts(any_success=True)), answer


@pytest.mark.parametrize("answer", ["الرقم المرجعي 4471", "رقم المرجع 4471", "المرجع رقم 4471"])
def test_arabic_generic_references_are_claims(answer):
    assert "reference 4471" in unverified_claims(answer, facts(any_success=True)), answer


# --- what stays honest ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "Your ticket \u0422\u041a\u0422\u2011456 is open.",  # a real ticket, spelled with lookalikes
        "Your ticket TKT\u2013\u0664\u0665\u0666 is open.",
        "Case #456 is open.",  # "case" is the helpdesk's word for the same ticket
    ],
)
def test_real_tickets_spelled_with_lookalikes_pass(answer):
    assert unverified_claims(answer, facts(tickets={"TKT-456"}, any_success=True)) == [], answer


def test_a_case_number_a_tool_returned_passes():
    assert unverified_claims("Your case number is 4471.", facts(seen={"4471"}, any_success=True)) == []


@pytest.mark.parametrize(
    "answer",
    [
        "Ref #8812 is on its way.",
        "Your reference number is 8812 and the parcel left our warehouse today.",
        "رقم المرجع ٨٨١٢",
    ],
)
def test_a_reference_the_customer_or_a_tool_gave_passes(answer):
    assert unverified_claims(answer, facts(given={"8812"}, any_success=True)) == [], answer


@pytest.mark.parametrize(
    "answer",
    [
        # The customer's own order: an order number is not a ticket (the numbers a customer gives are in `given`;
        # these pass even without it, since they name an order, not a case).
        "Your order (reference #8812) has shipped.",
        "Booking reference no. 55231 is confirmed by the airline.",
        "Your order ref 8812 left the warehouse today.",
        "Tracking reference: 99120455.",
        "رقم طلبك 8812 وحالته: قيد الشحن.",  # "your order number": an order, not a case
        "رقم الطلب ٨٨١٢",
        "حالة طلبك رقم 8812: قيد الشحن.",  # "the status of your order number 8812"
        # "case" in everyday words is no case number.
        "In the worst case 10 days, usually 3.",
        "Just in case 20 minutes isn't enough, call us.",
        "Our prices went up 12% this year.",
        "The refund 50 euros will arrive in 3 days.",
    ],
)
def test_order_references_and_everyday_words_pass(answer):
    assert unverified_claims(answer, facts(any_success=True)) == [], answer


def test_the_review_findings_read_no_differently_for_honest_text():
    # A dash-rich, accented, Arabic-digit answer that claims nothing still passes.
    answer = (
        "Caf\u00e9 hours \u2014 9\u201317 \u2014 haven\u2019t changed; your order \u0664\u0665 is on its way\u2026 "
        "Thanks!"
    )
    assert unverified_claims(answer, facts(any_success=True)) == []


def test_numbers_in_reads_every_decimal_digit():
    assert numbers_in("TKT-\u0664\u0665\u0666, \uff11\uff12 and \u096a\u096b") == {"456", "12", "45"}


# --- end to end: the number the customer gave is not a claim -------------------------------------------------


@pytest.mark.django_db
def test_a_reference_the_customer_gave_is_not_pushed_back(h):
    answer = "Reference number 8812: thank you, I can see it in your message."
    agent = h.agent("ref-given", [text(answer)] * 3)
    run = h.run(agent, "hello, my booking reference is ٨٨١٢")
    assert run["status"] == "completed", run
    assert run["output"]["unverified_claims"] == []
    assert len(h.fake.requests("ref-given")) == 1  # no push-back


@pytest.mark.django_db
def test_a_reference_no_one_gave_is_pushed_back(h):
    answer = "Ref #4471 is open."
    agent = h.agent("ref-invented", [text(answer)] * 3)
    run = h.run(agent, "hello, my booking reference is 8812")
    assert run["status"] == "completed", run
    assert run["output"]["unverified_claims"] == ["reference 4471"]


# --- the reading itself -----------------------------------------------------------------------------------------


def test_whitespace_is_read_as_python_reads_it():
    # The guard's words end where str.split() and str.strip() end them: the engine stores the answer stripped.
    import sys

    from runs.truth import _LINE_BREAKS, _RUN_RE

    every = "".join(chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF)
    spaces = {c for c in every if c.isspace()}
    assert {c for run in _RUN_RE.finditer(every, timeout=5) if run.group()[0].isspace() for c in run.group()} == spaces
    assert {c for c in spaces if len(("a" + c + "b").splitlines()) == 2} == set(_LINE_BREAKS)


def test_every_dash_reads_as_a_hyphen():
    import sys
    import unicodedata

    from runs.truth import _fold

    dashes = [chr(cp) for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Pd"]
    dashes += ["\u2212", "\u207b", "\u208b", "\u2796", "\u02d7", "\u2043"]
    assert {c: _fold("x" + c + "1") for c in dashes} == dict.fromkeys(dashes, "x-1")


def test_invisible_characters_are_dropped():
    from runs.truth import _fold

    invisible = "\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2066\u2067\u2068\u2069"
    invisible += "\u00ad\u034f\u061c\u180e\ufeff\ufe00\ufe0f\U000e0001\U000e0100\u3164\x07"
    assert {c: _fold("T" + c + "KT") for c in invisible} == dict.fromkeys(invisible, "TKT")


# Each must be read within the budget like the ASCII ones of test_truth.py.
HOSTILE_LOOKALIKES = {
    "cyrillic TKT + fullwidth zeros": "\u0422\u041a\u0422" + "\uff10" * 50_000 + "x",
    "zero-width spaces": "ticket" + "\u200b" * 100_000 + " 4471",
    "one long Arabic word": "تذكرة" * 20_000,
    "combining marks": "T" + "\u0301" * 100_000 + "KT-1",
    "dashes": "TKT" + "\u2011" * 100_000 + "1",
    "ligature expansions": "\ufdfa" * 20_000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE_LOOKALIKES))
def test_a_hostile_lookalike_answer_is_checked_within_two_seconds(name):
    import time

    started = time.monotonic()
    unverified_claims(HOSTILE_LOOKALIKES[name], facts())
    assert time.monotonic() - started < 2, name
