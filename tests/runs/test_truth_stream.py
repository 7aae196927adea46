"""The truthfulness guard over a streamed answer (`AnswerStream`, for `run.output.delta`): what it releases is a
prefix of the answer that holds no claim, whatever the chunks; an honest answer is released in full, and mostly
before the answer ends.

The phrasings are those the whole-answer tests hold (test_truth.py, test_truth_phrasings.py,
test_truth_lookalikes.py), each read under several sets of facts: a phrasing is a claim under some and honest under
others."""

from __future__ import annotations

import time
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs import truth
from runs.truth import AnswerStream, RunFacts, unverified_claims
from tests.runs import test_truth, test_truth_lookalikes, test_truth_phrasings


def _phrasings(*modules: ModuleType) -> list[str]:
    """Every answer a parametrized test of these modules reads."""
    found: list[str] = []
    for module in modules:
        for test in vars(module).values():
            for mark in getattr(test, "pytestmark", []):
                if mark.name == "parametrize" and mark.args[0] in ("text", "answer"):
                    found += [value for value in mark.args[1] if isinstance(value, str) and value not in found]
    return found


PHRASINGS = _phrasings(test_truth, test_truth_phrasings, test_truth_lookalikes)


def _facts(tickets=(), handoff=False, any_success=False, last_failed=None, ticket_made=False, given=()):
    return RunFacts(
        lambda: frozenset(tickets),
        lambda: handoff,
        any_success,
        last_failed,
        ticket_made,
        lambda: frozenset(),
        lambda: frozenset(given),
    )


FACTS = {
    "no tool": _facts(),
    "a lookup": _facts(any_success=True),
    "a failed cancel": _facts(last_failed="cancel_order"),
    "ticket 456": _facts(tickets={"TKT-456"}, any_success=True, ticket_made=True),
    "handed over": _facts(handoff=True, any_success=True),
    "8812 given": _facts(any_success=True, given={"8812"}),
}
CASES = [(text, name) for text in PHRASINGS for name in FACTS]
CLAIMS = [(text, name) for text, name in CASES if unverified_claims(text, FACTS[name])]
HONEST = [(text, name) for text, name in CASES if not unverified_claims(text, FACTS[name])]


def _stream(chunks: list[str], facts: RunFacts) -> tuple[list[str], truth.AnswerEnd, AnswerStream]:
    """Feeds the chunks; answers what was shown after each feed (joined so far), the end, and the stream."""
    stream = AnswerStream(facts)
    shown: list[str] = []
    for chunk in chunks:
        stream.feed(chunk)
        shown.append(stream.shown)
    return shown, stream.finish(), stream


def _assert_safe(text: str, facts: RunFacts, shown: str) -> None:
    """`shown` is a prefix of the stored answer, claims nothing, and leaves every claim of the answer unshown."""
    stored = text.strip()
    assert stored.startswith(shown), (text, shown)
    assert unverified_claims(shown, facts) == [], (text, shown)
    claims = unverified_claims(text, facts)
    if claims:
        assert set(claims) <= set(unverified_claims(stored[len(shown) :], facts)), (text, shown)


def test_the_phrasings_hold_claims_and_honest_answers():
    # The harvest found the tests' phrasings, and both kinds are among them.
    assert len(PHRASINGS) > 120
    assert len(CLAIMS) > 400 and len(HONEST) > 200, (len(CLAIMS), len(HONEST))


@pytest.mark.parametrize(("text", "facts"), CLAIMS)
def test_a_claim_split_anywhere_is_never_shown(text, facts):
    for cut in range(len(text) + 1):
        shown, end, _ = _stream([text[:cut], text[cut:]], FACTS[facts])
        for prefix in shown:
            _assert_safe(text, FACTS[facts], prefix)
        assert end.claims == unverified_claims(text, FACTS[facts]) and end.delta == ""


@pytest.mark.parametrize(("text", "facts"), CLAIMS)
def test_a_claim_after_an_honest_sentence_is_never_shown(text, facts):
    answer = "Thanks for waiting.\n" + text + " Is there anything else?"
    shown, end, _ = _stream(list(answer), FACTS[facts])  # one character at a time
    for prefix in shown:
        _assert_safe(answer, FACTS[facts], prefix)
    assert shown[-1].startswith("Thanks for waiting.")
    assert end.claims


@pytest.mark.parametrize(("text", "facts"), HONEST)
def test_an_honest_answer_is_released_in_full(text, facts):
    for cut in range(len(text) + 1):
        shown, end, stream = _stream([text[:cut], text[cut:]], FACTS[facts])
        assert end.claims == [] and stream.shown == text.strip(), (text, cut)
        assert shown[-1] + end.delta == text.strip()


HONEST_LONG = (
    "Thanks for your patience! I looked up order 8812: it left our warehouse on Monday. The courier expects to "
    "deliver it on Thursday between 9 and 5.\nIf it hasn't arrived by Friday, reply here and we'll look again. "
    "Ticket TKT-456 stays open until then. Anything else I can help with?"
)


def test_an_honest_answer_is_released_sentence_by_sentence_before_it_ends():
    shown, end, stream = _stream([HONEST_LONG[i : i + 4] for i in range(0, len(HONEST_LONG), 4)], FACTS["ticket 456"])
    assert end.claims == []
    # Everything but the last sentence was shown before the answer ended, each sentence once it was complete.
    assert shown[-1] == HONEST_LONG[: HONEST_LONG.index(" Anything else")]
    assert end.delta == " Anything else I can help with?"
    assert "Thanks for your patience!" in shown[len("Thanks for your patience! I") // 4]


def test_a_number_is_held_until_it_can_no_longer_complete_a_claim():
    # "ticket no." ends a sentence, and its number may follow in the next one.
    stream = AnswerStream(FACTS["a lookup"])
    assert stream.feed("Sure. Your ticket no. ") == "Sure."
    assert stream.feed("4") == ""
    assert stream.feed("471 is open. ") == ""
    assert stream.finish().claims == ["ticket 4471"]
    stream = AnswerStream(FACTS["a lookup"])
    stream.feed("Sure. Your ticket no. ")
    assert stream.feed("Sorry, I meant your order. ") == " Your ticket no. Sorry, I meant your order."


def test_a_sentence_is_held_until_it_ends():
    stream = AnswerStream(FACTS["no tool"])
    assert stream.feed("I've transferred") == ""
    assert stream.feed(" nothing yet: I couldn't") == ""
    assert stream.feed(" reach the team.") == ""  # no whitespace after the full stop yet: "team.s" may follow
    assert stream.feed(" ") == "I've transferred nothing yet: I couldn't reach the team."
    assert stream.finish() == truth.AnswerEnd("", [])


def test_lookalikes_are_held_like_their_plain_spelling():
    stream = AnswerStream(FACTS["a lookup"])
    for chunk in ["Done. ", "Your ticket is \u0422\u041a", "\u0422\u2011", "44", "71. ", "Bye."]:
        stream.feed(chunk)
    assert stream.shown == "Done."
    assert stream.finish().claims == ["ticket TKT-4471"]


def test_after_a_claim_nothing_more_is_shown():
    stream = AnswerStream(FACTS["no tool"])
    stream.feed("Hello. I've cancelled your order. Your parcel left on Monday. ")
    assert stream.shown == "Hello."
    assert stream.finish().claims == ['action claimed without a tool: "I\'ve cancelled"']


def test_nothing_is_released_before_the_end_when_no_time_is_left(monkeypatch):
    monkeypatch.setattr(truth, "CHECK_BUDGET_S", 0.0)
    stream = AnswerStream(FACTS["a lookup"])
    assert stream.feed("Hello. Your parcel left on Monday. ") == ""
    assert stream.finish() == truth.AnswerEnd("", [truth.UNCHECKED_CLAIM])


def test_whitespace_around_the_answer_is_not_shown():
    shown, end, stream = _stream(["\n  Hello. ", "  Bye.\n\n  "], FACTS["no tool"])
    assert shown == ["Hello.", "Hello.   Bye."] and end.delta == "" and stream.shown == "Hello.   Bye."
    _, end, stream = _stream([" \n ", " "], FACTS["no tool"])
    assert end == truth.AnswerEnd("", []) and stream.shown == ""


def test_a_finished_stream_takes_no_more():
    stream = AnswerStream(FACTS["no tool"])
    stream.finish()
    with pytest.raises(RuntimeError):
        stream.feed("more")


# --- any answer, any chunks -------------------------------------------------------------------------------------

_SEPARATORS = st.sampled_from([" ", "  ", "\n", " \n ", "\t", "\u00a0", "\u2028", ""])
_FRAGMENTS = st.sampled_from(
    PHRASINGS
    + [
        "Thanks for waiting.",
        "Your ticket",
        "no.",
        "number",
        "#",
        "4471",
        "TKT",
        "-",
        "\u2011",
        "\u200b",
        "reference",
        "case",
        "رقم",
        "البلاغ",
        "order",
        "I've",
        "transferred you.",
        "is open.",
        "If",
        ",",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.tuples(_FRAGMENTS, _SEPARATORS), min_size=1, max_size=6),
    facts=st.sampled_from(sorted(FACTS)),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_answer_in_any_chunks_shows_no_claim(parts, facts, cuts):
    answer = "".join(fragment + separator for fragment, separator in parts)
    bounds = sorted({0, len(answer), *(cut % (len(answer) + 1) for cut in cuts)})
    chunks = [answer[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    shown, end, stream = _stream(chunks, FACTS[facts])
    for prefix in shown:
        _assert_safe(answer, FACTS[facts], prefix)
    assert end.claims == unverified_claims(answer, FACTS[facts])
    if not end.claims:
        assert stream.shown == answer.strip()


# --- cost -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "Your parcel left our warehouse on Monday and the courier expects it on Thursday. " * 600,  # 48,600 chars
        "word " * 10_000 + ".",  # one long sentence
        "ticket\n" * 5_000 + "done.",  # each line a sentence that may begin a ticket number
        "Your ticket no. " * 3_000,  # each sentence waits for the next
    ],
    ids=["sentences", "one-sentence", "ticket-lines", "ticket-no"],
)
def test_streaming_character_by_character_stays_linear(answer):
    started = time.monotonic()
    stream = AnswerStream(FACTS["a lookup"])
    for char in answer:
        stream.feed(char)
    fed = time.monotonic() - started
    end = stream.finish()
    assert time.monotonic() - started < 5, fed
    assert end.claims == [] and stream.shown == answer.strip()


@pytest.mark.parametrize("name", sorted(test_truth.HOSTILE_ANSWERS))
def test_a_hostile_answer_streams_within_the_budget(name):
    answer = test_truth.HOSTILE_ANSWERS[name]
    started = time.monotonic()
    stream = AnswerStream(FACTS["no tool"])
    for at in range(0, len(answer), 1_000):
        stream.feed(answer[at : at + 1_000])
    stream.finish()
    assert time.monotonic() - started < 4, name  # the stream's budget, then the whole answer's


def test_each_lookup_is_asked_once():
    # The facts' lookups may cost a query; an answer may name many numbers, in many sentences.
    asked: list[str] = []

    def lookup(name, value):
        return lambda: asked.append(name) or value

    facts = RunFacts(
        lookup("tickets", frozenset({"TKT-456"})),
        lookup("handoff", False),
        True,
        None,
        False,
        lookup("seen", frozenset()),
        lookup("given", frozenset({"8812"})),
    )
    answer = "Ticket TKT-456 is open. I've transferred you. " * 3 + "Ref 8812 and case 4471. Reference 8812."
    stream = AnswerStream(facts)
    for at in range(0, len(answer), 5):
        stream.feed(answer[at : at + 5])
    assert stream.finish().claims == ["case 4471", "handoff to the team"]
    assert sorted(asked) == ["given", "handoff", "seen", "tickets"]
    asked.clear()
    assert unverified_claims(answer, facts) == ["case 4471", "handoff to the team"]
    assert sorted(asked) == ["given", "handoff", "seen", "tickets"]
