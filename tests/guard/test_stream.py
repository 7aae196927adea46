"""The stream gate (guard/stream.py): what it releases is a prefix of the answer that holds no claim, whatever the
chunks; an honest answer is released in full, each sentence once it is whole; a claim is never shown."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guard
from guard import AnswerEnd, AnswerStream, Facts, check
from tests.guard.conftest import call, facts
from tests.guard.test_claims import HOSTILE, REGRESSIONS

FACTS: dict[str, Facts] = {
    "no tool": facts(),
    "a lookup": facts(call("order_status", effect="read", result={"ok": True, "data": {"order": "8812"}})),
    "a failed cancel": facts(call("cancel_order", ok=False)),
    "a cancel": facts(call("cancel_order")),
    "ticket 456": facts(call("create_ticket", result={"ok": True, "ticket": {"number": "TKT-456"}})),
    "handed over": facts(handed_off=True),
}
ANSWERS = [
    *REGRESSIONS,
    "Thanks for your patience! I looked up order 8812: it is with the courier.",
    "I've cancelled your order. Anything else?",
    "Your ticket TKT-456 is open, and our team will contact you.",
    "I've transferred you to our team.",
    "If your order has been cancelled, you'll get an email.",
    "Would you like me to cancel it?",
    "**Done!** Your order is cancelled.\n\n- Order: 8812\n- Refund: on its way",
    "Sure.\nYour ticket no. 4471 is open.",
]
CASES = [(text, name) for text in ANSWERS for name in FACTS]


def _stream(chunks: list[str], facts: Facts) -> tuple[list[str], AnswerEnd, AnswerStream]:
    stream = AnswerStream(facts)
    shown = []
    for chunk in chunks:
        stream.feed(chunk)
        shown.append(stream.shown)
    return shown, stream.finish(), stream


def _assert_safe(text: str, facts: Facts, shown: str) -> None:
    """`shown` is a prefix of the stored answer and claims nothing."""
    assert text.strip().startswith(shown), (text, shown)
    assert check(shown, facts) == [], (text, shown)


@pytest.mark.parametrize(("text", "name"), CASES)
def test_an_answer_split_anywhere_shows_no_claim_and_ends_as_the_whole_check(text, name):
    whole = check(text, FACTS[name])
    for cut in range(len(text) + 1):
        shown, end, stream = _stream([text[:cut], text[cut:]], FACTS[name])
        for prefix in shown:
            _assert_safe(text, FACTS[name], prefix)
        assert end.claims == whole
        if not whole:
            assert stream.shown == text.strip() and shown[-1] + end.delta == text.strip()
        else:
            assert end.delta == ""


@pytest.mark.parametrize(("text", "name"), CASES)
def test_character_by_character_after_an_honest_sentence(text, name):
    answer = "Thanks for waiting.\n\n" + text + " Is there anything else?"
    shown, end, _ = _stream(list(answer), FACTS[name])
    for prefix in shown:
        _assert_safe(answer, FACTS[name], prefix)
    assert shown[-1].startswith("Thanks for waiting.")
    assert end.claims == check(answer, FACTS[name])


def test_an_honest_answer_is_released_sentence_by_sentence_before_it_ends():
    answer = (
        "Thanks for your patience! I looked up order 8812: it is with the courier. If it hasn't arrived by "
        "Friday, reply here and we'll look again. Anything else I can help with?"
    )
    shown, end, _ = _stream([answer[i : i + 4] for i in range(0, len(answer), 4)], FACTS["a lookup"])
    assert end.claims == []
    assert shown[-1] == answer[: answer.index(" Anything else")]
    assert end.delta == " Anything else I can help with?"
    assert "Thanks for your patience!" in shown[len("Thanks for your patience! I") // 4]


def test_a_sentence_is_held_until_it_ends_and_a_line_until_the_next_begins():
    stream = AnswerStream(FACTS["no tool"])
    assert stream.feed("I've") == ""
    assert stream.feed("\n") == ""
    assert stream.feed("cancelled your order.") == ""  # no whitespace after the full stop yet
    assert stream.feed(" ") == ""  # a claim: never released
    assert stream.finish().claims[0].kind == guard.UNBACKED_ACTION
    stream = AnswerStream(FACTS["a lookup"])
    assert stream.feed("- Order: 8812\n") == ""  # a list item ends when the next line shows it was one
    assert stream.feed("- Status") == "- Order: 8812"


def test_after_a_claim_nothing_more_is_shown():
    stream = AnswerStream(FACTS["no tool"])
    stream.feed("Hello. I've cancelled your order. Have a nice day. ")
    assert stream.shown == "Hello."
    assert [claim.kind for claim in stream.finish().claims] == [guard.UNBACKED_ACTION]


def test_nothing_is_released_when_no_time_is_left(monkeypatch):
    monkeypatch.setattr(guard.stream, "CHECK_BUDGET_S", 0.0)
    stream = AnswerStream(FACTS["a lookup"])
    assert stream.feed("Hello. Your parcel is on its way. ") == ""
    assert stream.finish() == AnswerEnd("", [guard.UNCHECKED_CLAIM])


def test_whitespace_around_the_answer_is_not_shown():
    shown, end, stream = _stream(["\n  Hello. ", "  Bye.\n\n  "], FACTS["no tool"])
    assert shown == ["Hello.", "Hello.   Bye."] and end.delta == "" and stream.shown == "Hello.   Bye."


def test_a_finished_stream_takes_no_more():
    stream = AnswerStream(FACTS["no tool"])
    stream.finish()
    with pytest.raises(RuntimeError):
        stream.feed("more")


_SEPARATORS = st.sampled_from([" ", "  ", "\n", "\n\n", " \n ", "\t", "\u00a0", "\u2028", "\u200b", ""])
_FRAGMENTS = st.sampled_from(
    [*ANSWERS, "Thanks.", "Your ticket", "no.", "number", "#", "4471", "TKT", "-", "**", "`", "_", "- ", "| ",
     "I've", "cancelled", "transferred you.", "is open.", "If", ",", "تم", "إلغاء", "طلبك", "30 days", "thirty"]
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.tuples(_FRAGMENTS, _SEPARATORS), min_size=1, max_size=6),
    name=st.sampled_from(sorted(FACTS)),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_answer_in_any_chunks_shows_no_claim(parts, name, cuts):
    answer = "".join(fragment + separator for fragment, separator in parts)
    bounds = sorted({0, len(answer), *(cut % (len(answer) + 1) for cut in cuts)})
    chunks = [answer[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    shown, end, stream = _stream(chunks, FACTS[name])
    for prefix in shown:
        _assert_safe(answer, FACTS[name], prefix)
    assert end.claims == check(answer, FACTS[name])
    if not end.claims:
        assert stream.shown == answer.strip()


@pytest.mark.parametrize(
    "answer",
    [
        "Your parcel left our warehouse and the courier has it with them now. " * 600,
        "word " * 10_000 + ".",
        "ticket\n" * 5_000 + "fine.",
        "Your ticket no. " * 3_000,
    ],
    ids=["sentences", "one-sentence", "ticket-lines", "ticket-no"],
)
def test_streaming_character_by_character_stays_linear(answer):
    started = time.monotonic()
    stream = AnswerStream(FACTS["a lookup"])
    for char in answer:
        stream.feed(char)
    end = stream.finish()
    assert time.monotonic() - started < 5
    assert end.claims == [] and stream.shown == answer.strip()


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_answer_streams_within_the_budget(name):
    answer = HOSTILE[name]
    started = time.monotonic()
    stream = AnswerStream(FACTS["no tool"])
    for at in range(0, len(answer), 1_000):
        stream.feed(answer[at : at + 1_000])
    stream.finish()
    assert time.monotonic() - started < 4, name


def test_each_lookup_is_asked_once():
    asked: list[str] = []

    def lookup(name, value):
        return lambda: asked.append(name) or value

    facts_ = Facts(
        calls=(call("order_status", effect="read"),),
        earlier_calls=lookup("earlier", ()),
        ticket_numbers=lookup("tickets", frozenset({"TKT-456"})),
        handed_off=lookup("handoff", False),
    )
    answer = "Ticket TKT-456 is open. I've transferred you to our team. " * 3 + "Case 4471 and case 4472."
    stream = AnswerStream(facts_)
    for at in range(0, len(answer), 5):
        stream.feed(answer[at : at + 5])
    assert [claim.text for claim in stream.finish().claims][:1] == ["I've transferred you to our team."]
    assert sorted(asked) == ["earlier", "handoff", "tickets"]
