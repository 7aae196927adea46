"""The truthfulness guard: a run may not end on a confirmation the tools did not produce.

SPEC §5: a ticket number, a handoff, or success claimed by no tool — or a "done" right after a failed call — is
pushed back to the model (at most twice) and, if still there, listed in the output's `unverified_claims`.
An honest admission is accepted at once (kdeps, "Failed tool calls are fed back to the model"): it is read per
sentence, so "Sorry for the wait! I've cancelled your order." is still a claim.

The answer is read as a person sees it, not as its code points spell it (`_fold`): `TKT‑4471` with a non-breaking
hyphen, `ＴＫＴ-4471`, a Cyrillic `ТКТ-4471` or one with a zero-width space inside are all TKT-4471.

A number presented as a ticket's or a case's ("ticket 4471", "case #4471", "رقم البلاغ 4471") is true only when a
ticket tool made it or a tool result gave it under a ticket-like key; a bare reference ("Ref #4471", "reference
number 4471", "الرقم المرجعي 4471") also when the customer or any tool result gave that number (the customer's
own booking reference, a return request's number). An order's own number ("order ref 8812", "رقم طلبك 8812") is
not a claim: it names an order, not a case.

Streaming (SPEC §4 "Run events": a `run.output.delta` carries only text the guard has passed, no unverified
confirmation is shown even for an instant): `AnswerStream` is fed the answer as the model writes it and answers
what may be shown now. The granularity is the sentence as the whole-answer check reads it: a sentence is released
once it is complete (its closing `.!?؟。` and the whitespace after it, or a line break, have arrived), it passed the
same per-sentence checks, and no numbered claim can still begin in it (the number patterns span sentences: "Your
ticket no. 4471" splits after "no.", so "Your ticket no." waits for what follows). Why the sentence: the checks
read a sentence whole (an admission anywhere in it clears it, a leading condition ends at its comma, "I've
transferred" is a claim only once "you" follows), so nothing shorter can be passed; anything longer only delays
honest text. The sentence being written, and everything from a sentence that is a claim on, wait for `finish()`,
which runs the whole-answer check (`unverified_claims`, the engine's verdict) and releases the rest only when it
passes. Released text, joined, is always a prefix of the answer stripped (as the engine stores it) and holds no
claim; the caller feeds exactly the text it would finish with (cleaned as `_clean` does, without tool calls
written as text) and sends `run.output.reset` when `finish()` answers claims.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import time
import unicodedata
from collections import deque
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

import regex

MAX_PUSHBACKS = 2

# The patterns below read a model's answer, which anyone can steer (a tenant's own base_url, a prompt-injected model,
# the demo model echoing the customer). Two guarantees, either enough on its own:
# - linear by construction: the answer is squeezed first (`_Reader`: every run of whitespace becomes one space or
#   one newline), so each `\s*`/`\s+` matches at most one character and neighbouring optional parts can't trade
#   characters; a number is taken whole (`(\d+)`, leading zeros dropped afterwards), never split between `0*` and
#   `\d+`; every match starts on a literal word, so a failed start costs a constant;
# - a time limit anyway: every match runs on the `regex` module with `timeout=` from one budget for the whole answer
#   (`CHECK_BUDGET_S`); an answer that can't be read within it is a claim ("could not be checked"), never a pass.
CHECK_BUDGET_S = 1.0
UNCHECKED_CLAIM = "the answer could not be checked in time"

_AR = "\u0600-\u06ff"
# Not inside an Arabic word, but after an attached conjunction (و "and", ف "so"): "وتم تحويل محادثتك".
_NOT_AR_BEFORE = f"(?<![{_AR}])[وف]?"
# "ticket" and "your ticket" (ة is written ت before a suffix: تذكرتك, تذكرتكم).
_AR_TICKET = "تذكر(?:ة|تك|تكم)"
_OBJECT = r"(?:you|this|your\s+\w+|the\s+(?:conversation|chat|case|request)|it)"
_CHANGE_VERBS = (
    r"cancell?ed|updated|changed|booked|created|submitted|processed|refunded|issued|scheduled|rescheduled|reset|"
    r"opened|raised|logged|filed|lodged|registered|confirmed|applied|removed|deleted|placed|sent|activated|deactivated|upgraded|downgraded"
)
_OWN_THINGS = r"(?:opening\s+)?(?:hours|website|site|app|policy|policies|prices|pricing|menu|terms|catalogue|catalog)"
_ADVERBS = r"(?:(?:just|now|already|successfully|also|gone ahead and|went ahead and)\s+)*"

# linear: literal TKT, then optional single characters of distinct kinds and one digit run taken whole (see above).
_TICKET_CODE_RE = regex.compile(r"\bTKT\s?[-#:]?\s?(\d+)\b", regex.IGNORECASE)
# linear: a literal word first, then optional parts separated by at most one (squeezed) whitespace character each.
_TICKET_WORD_RE = regex.compile(
    r"\bticket\s?(?:number|no\.?|id|#)?\s?(?:is|was|:)?\s?[-#]?\s?(?:TKT-?)?(\d{2,})\b"
    rf"|{_NOT_AR_BEFORE}(?:ال)?{_AR_TICKET}\s?(?:رقم)?\s?:?\s?#?\s?(\d+)"
    rf"|{_NOT_AR_BEFORE}رقم\s(?:ال)?{_AR_TICKET}\s?(?:هو|هي)?\s?:?\s?#?\s?(\d+)",
    regex.IGNORECASE,
)
# A case under another name: "case", "incident", "complaint", a support request; in Arabic a report (بلاغ), a
# complaint (شكوى), a case (حالة, قضية: only after رقم, "number", since حالة alone is also an order's status).
_AR_CASE = r"(?:بلاغ(?:ك|كم)?|شكو(?:ى|ي|اك|اكم)|حال(?:ة|تك|تكم)|قضي(?:ة|تك|تكم)|طلب\s(?:ال)?دعم)"
# Everyday phrases where "case" is no case: "in case 20 minutes...", "in the worst case 10 days".
_NOT_A_CASE = r"(?<!\b(?:in|worst|best|use|test|this|that|each|every|any|either|which)\s)"
# linear: every branch starts on a literal word (the look-behind reads at most 7 characters), then optional parts
# one squeezed character apart and one digit run.
_CASE_RE = regex.compile(
    rf"{_NOT_A_CASE}\b(?:case|incident|complaint|(?:support|service|help)\srequest)s?\s?"
    r"(?:(?:number|no\.?|id|ref(?:erence)?)\s?)?(?:(?:is|was)\s?)?[-#:]?\s?#?\s?(\d{2,})\b"
    rf"|{_NOT_AR_BEFORE}رقم\s(?:ال)?{_AR_CASE}\s?(?:هو|هي)?\s?:?\s?#?\s?(\d+)"
    rf"|{_NOT_AR_BEFORE}(?:ال)?(?:بلاغ(?:ك|كم)?|شكو(?:ى|ي|اك|اكم))\s?(?:رقم)?\s?:?\s?#?\s?(\d+)",
    regex.IGNORECASE,
)
# Whose reference it is, when it is an order's (or a booking's...): "Your order (reference #8812) has shipped".
_OWNERS = (
    r"order|booking|tracking|invoice|payment|flight|shipment|reservation|transaction|account|delivery|parcel|"
    r"package|confirmation|pnr"
)
# linear: as _CASE_RE; the owner is one literal word and at most three single characters before the reference.
_REFERENCE_RE = regex.compile(
    rf"(?:\b(?P<owner>{_OWNERS})\s?\(?\s?)?\b(?:ref(?:erence)?\b\.?|request)\s?(?:(?:number|no\.?|id)\s?)?"
    r"(?:(?:is|was)\s?)?[-#:]?\s?#?\s?(\d{2,})\b"
    rf"|{_NOT_AR_BEFORE}(?:رقم\s?(?:ال)?مرجع(?:ي|ك|كم)?|(?:ال)?رقم\s(?:ال)?مرجعي|(?:ال)?مرجع\s?رقم)"
    r"\s?(?:هو|هي)?\s?:?\s?#?\s?(\d+)",
    regex.IGNORECASE,
)
# What a number can be presented as. Its patterns run over the whole answer (a number can follow its word across a
# sentence's end: "ticket no. 4471"); they read every whitespace character alike.
_NUMBERED_KINDS: Final = ("ticket code", "ticket", "case", "reference")
# linear: every branch starts on a literal word; \s+ meets one squeezed character; each adverb turn needs a word.
_HANDOFF_RE = regex.compile(
    rf"\b(?:I|we)(?:'ve|'re| have| are)?\s+{_ADVERBS}(?:transferred|escalated|handed|passed|connected|forwarded)"
    rf"\s+{_OBJECT}\b"
    rf"|\b(?:I'm|I am|we're|we are)\s+(?:now\s+)?(?:transferring|connecting|escalating|handing|passing)\s+{_OBJECT}\b"
    r"|\b(?:you|this|your\s+\w+|the\s+(?:conversation|chat|case|request))\s+(?:has|have|is|are)\s+(?:now\s+)?"
    r"(?:been\s+)?(?:transferred|escalated|handed over|passed on|forwarded)\b"
    r"|\b(?:a|an|our)\s(?:(?:human|live|support)\s)?(?:agent|representative|team member|specialist|colleague)s?\s+"
    r"(?:will|is going to|are going to)\s+(?:join|take over|contact|be with|reach out|get back|continue)\b"
    rf"|{_NOT_AR_BEFORE}(?:تم\s+تحويل|قمت\s+بتحويل|سيتم\s+تحويل|حولت|حوّلت|تم\s+تصعيد|قمت\s+بتصعيد|سيتم\s+تصعيد"
    r"|تم\s+نقل\s+(?:محادثتك|المحادثة|طلبك)|سيتواصل\s+معك|سيقوم\s+أحد)",
    regex.IGNORECASE,
)
# linear: as _HANDOFF_RE. The team promised to come back to the customer: true after a handoff or a ticket.
_FOLLOW_UP_RE = regex.compile(
    r"\b(?:our|the)\s(?:(?:support|service|customer service|care)\s)?team\s+(?:will|is going to)\s+"
    r"(?:contact|call|reach out|get back|be in touch|follow up|take over|continue)\b"
    r"|\b(?:someone|a member|one)\s(?:from|of)\s(?:our|the)\s(?:(?:support|service)\s)?team\s+(?:will|is going to)\b",
    regex.IGNORECASE,
)
# linear: as _HANDOFF_RE.
_CHANGE_RE = regex.compile(
    # "We've updated our opening hours" is the business speaking of itself, not a change made for the customer
    # ("I've updated our records with your address" is one).
    rf"\b(?:I|we)(?:'ve| have)?\s+{_ADVERBS}(?:{_CHANGE_VERBS})\b(?!\s+our\s+{_OWN_THINGS}\b)"
    rf"|\b(?:has|have)\s+(?:now\s+|just\s+)?been\s+(?:successfully\s+)?(?:{_CHANGE_VERBS})\b"
    rf"|\bis\s+now\s+(?:{_CHANGE_VERBS})\b"
    rf"|{_NOT_AR_BEFORE}(?:تم\s+(?:ال)?(?:إلغاء|الغاء|تحديث|تغيير|إرسال|ارسال|تأكيد|تاكيد|حجز|استرداد|إنشاء|انشاء|فتح|حذف)"
    r"|تم\s+بنجاح|تمت\s+العملية|ألغيت|الغيت|حدثت\s+طلبك)",
    regex.IGNORECASE,
)
# linear: a literal word, one squeezed space, an optional literal word and space, then literal alternatives.
# "it was not done", "hasn't been processed": a "done" said not to have happened is no "done" (taken out of the
# sentence before _DONE_RE reads it; every other claim in the sentence is still read).
_NOT_DONE_RE = regex.compile(
    r"(?:\bnot|n't|\bnever)\s(?:been\s|yet\s)?(?:done|completed|processed|carried\sout|taken care of)\b",
    regex.IGNORECASE,
)
# linear: literal alternatives only.
_DONE_RE = regex.compile(r"\b(?:done|all set|successfully|completed|taken care of)\b|تم\s+بنجاح|تمت", regex.IGNORECASE)
# linear: literal alternatives only.
_ADMISSION_RE = regex.compile(
    r"\b(?:couldn't|could not|can't|cannot|unable|wasn't able|was not able|not able|didn't work|did not work|"
    r"didn't go through|did not go through|failed|wasn't possible|was not possible|haven't been able)\b"
    rf"|{_NOT_AR_BEFORE}(?:لم\s+أتمكن|لم\s+اتمكن|لم\s+نتمكن|تعذر|تعذّر|فشل|لا\s+أستطيع|لا\s+يمكنني)",
    regex.IGNORECASE,
)
# linear: anchored at the sentence's start, a literal word, then one negated class up to the first comma.
# A leading condition ("If your order has been cancelled, the refund takes 5 days") states no fact: what follows
# its comma is read (a condition without its comma is read whole: where it ends can't be told).
_CONDITION_RE = regex.compile(
    r"^(?:if|once(?!\s+again)|when|whenever|in case|should|unless)\b[^,،\n]*[,،]"
    r"|^[وف]?(?:إذا|اذا|لو|في\s+حال|عندما|حين)[^,،\n]*[,،]",
    regex.IGNORECASE,
)
# linear: each branch starts on a literal word, then optional words one squeezed space apart.
# A ticket made: "I've opened a ticket", "your ticket has been created", "تم فتح تذكرة" (not "no need to open one").
_TICKET_CLAIM_RE = regex.compile(
    r"\b(?:opened|raised|logged|filed|lodged|created|submitted|registered)\s(?:(?:a|an|the|your|this|one)\s)?"
    r"(?:(?:new|support|service|help|priority)\s)?ticket\b"
    r"|\bticket\s(?:has|have|is|was)\s(?:now\s|just\s)?(?:been\s)?"
    r"(?:opened|raised|logged|filed|created|submitted|registered)\b"
    rf"|{_NOT_AR_BEFORE}(?:(?:تم|قمت\s?ب)\s?(?:فتح|إنشاء|انشاء|تسجيل|رفع)\s(?:ال)?{_AR_TICKET}|فتحت\s(?:ال)?{_AR_TICKET})",
    regex.IGNORECASE,
)
# linear: a one-character look-behind and one squeezed whitespace character or newline.
_SENTENCE_ENDS = ".!?؟。"
_SENTENCE_SPLIT_RE = regex.compile(rf"(?<=[{_SENTENCE_ENDS}])\s|\n")


# --- reading the answer as a person sees it --------------------------------------------------------------------

# Whitespace exactly as str.isspace() and str.strip() read it (a test holds this to the interpreter's own), and
# the line breaks among it as str.splitlines() reads them.
_SPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_LINE_BREAKS = frozenset("\n\x0b\x0c\r\x1c\x1d\x1e\x85\u2028\u2029")
# linear: two complementary classes, each run taken whole.
_RUN_RE = regex.compile(f"[{_SPACE}]+|[^{_SPACE}]+")

# Characters a reader takes for an apostrophe ("I’ve", "Iʼve", "I´ve" are "I've"); mapped before NFKC, which would
# turn the acute accent into a space and a combining mark.
_APOSTROPHES = str.maketrans(dict.fromkeys("\u2019\u2018\u201b\u02bc\u02bb\u02b9\u00b4\u2032\uff07", "'"))
# Every dash a reader takes for '-': Unicode's Dash_Punctuation (Pd, a test walks the whole category), the minus
# signs and the hyphen bullet, as they are after NFKC (which already reads U+FE63, U+FF0D and U+207B/U+208B).
_DASHES = (
    "\u058a\u05be\u1400\u1806\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\u2796\u02d7\u2e17\u2e1a\u2e3a\u2e3b"
    "\u2e40\u2e5d\u301c\u3030\u30a0\ufe31\ufe32\ufe58\ufe63\uff0d\U00010ead"
)
# Letters that look like Latin ones, as Unicode's confusables data (UTS #39, confusables.txt) maps them to a-z/A-Z:
# Cyrillic, Greek, Armenian, Cherokee, and Latin's own small capitals and dotless letters. NFKC already reads the
# fullwidth, mathematical and other compatibility forms. Matching ignores case, so each letter maps to either.
_LOOKALIKE_PAIRS = (
    # Cyrillic
    ("АВЕЅІЈКМНОРСТХУҮҺԚԜӀЁЇ", "ABESIJKMHOPCTXYYHQWIEI"),
    ("аеоѕіјкмрстухһԁԛԝӏёї", "aeosijkmpctyxhdqwlei"),
    # Greek
    ("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧϹͿ", "ABEZHIKMNOPTYXCJ"),
    ("αιγκνοηρτυϲϳ", "aiyknonptucj"),
    # Armenian
    ("ՕՍՏԼօսհոզց", "OUSLouhnqg"),
    # Cherokee
    ("ᎪᏴᏟᎬᎻᎢᏦᎷᏢᏚᎳᏃᎫᏞᎠᏀᏙ", "ABCEHTKMPSWZJLDGV"),
    # Latin lookalikes
    ("ıȷɑɡɩɪᴄᴏᴜᴠᴡᴢꜱ", "ijagiicouvwzs"),
)
_LOOKALIKES: Final[dict[int, str]] = {
    ord(char): latin for chars, latins in _LOOKALIKE_PAIRS for char, latin in zip(chars, latins, strict=True)
}
# Latin letters with a diacritic as their base letter ("Ťicket" is "ticket"): Latin-1 Supplement, Latin
# Extended-A/B and Latin Extended Additional.
_LATIN_BASES: Final[dict[int, str]] = {
    cp: base
    for cp in (*range(0x00C0, 0x0250), *range(0x1E00, 0x1F00))
    if (base := unicodedata.normalize("NFD", chr(cp))[0]).isascii() and base != chr(cp)
}
_AFTER_NFKC = str.maketrans({**_LATIN_BASES, **_LOOKALIKES, **dict.fromkeys(map(ord, _DASHES), "-")})
_APOSTROPHES_AFTER_NFKC = dict.fromkeys(map(ord, "\u2019\u2018\u201b\u02bc\u02bb\u02b9\u2032"), "'")
# Blank letters: the Hangul fillers render as nothing.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")


def _fold(word: str) -> str:
    """One word (no whitespace) as a person reads it: NFKC; marks, format and control characters dropped (zero-width
    characters, bidi marks, the soft hyphen, variation selectors, combining accents); lookalike letters as Latin,
    every dash as '-', every decimal digit as ASCII. Whitespace NFKC makes inside a word (U+FDFA) is dropped too:
    a word stays a word."""
    if word.isascii() and word.isprintable():
        return word
    text = unicodedata.normalize("NFKC", word.translate(_APOSTROPHES)).translate(_AFTER_NFKC)
    out: list[str] = []
    for char in text:
        if char.isascii():
            if char.isprintable() and not char.isspace():
                out.append(char)
            continue
        category = unicodedata.category(char)
        if category[0] in "CMZ" or char in _BLANK_LETTERS or char.isspace():
            continue
        if category == "Nd":
            out.append(str(unicodedata.decimal(char)))
        else:
            out.append(_APOSTROPHES_AFTER_NFKC.get(ord(char), char))
    return "".join(out)


class _Word(NamedTuple):
    text: str  # folded: never empty, no whitespace
    end: int  # where the word ends in the answer as written


# A line break in the whitespace after the last word (only the first one of a gap is reported).
_BREAK: Final = None


class _Reader:
    """The answer as the patterns read it, taken as it arrives: words (runs of non-whitespace) folded, a word that
    folds to nothing dropped; between two words one space, or one newline where the whitespace held a line break;
    nothing before the first word or after the last (see the note at the top: each `\\s` meets one character)."""

    def __init__(self) -> None:
        self._word: list[str] = []  # the word being written
        self._word_end = 0
        self._read = 0  # characters of the answer read
        self._words = 0
        self._broke = False  # a line break was already reported since the last word

    def feed(self, chunk: str, budget: _Budget) -> list[_Word | None]:
        out: list[_Word | None] = []
        for run in _RUN_RE.finditer(chunk, timeout=budget.left()):
            piece = run.group()
            self._read += len(piece)
            if piece[0].isspace():
                self._end_word(out)
                if self._words and not self._broke and not _LINE_BREAKS.isdisjoint(piece):
                    self._broke = True
                    out.append(_BREAK)
            else:
                self._word.append(piece)
                self._word_end = self._read
        return out

    def close(self) -> list[_Word | None]:
        out: list[_Word | None] = []
        self._end_word(out)
        return out

    def _end_word(self, out: list[_Word | None]) -> None:
        if not self._word:
            return
        text = _fold("".join(self._word))
        self._word = []
        if text:
            out.append(_Word(text, self._word_end))
            self._words += 1
            self._broke = False


def _read(text: str, budget: _Budget) -> str:
    """The whole answer as `_Reader` reads it."""
    reader = _Reader()
    parts: list[str] = []
    separator = ""
    for piece in [*reader.feed(text, budget), *reader.close()]:
        if piece is _BREAK:
            separator = "\n"
        else:
            parts.append(separator + piece.text)
            separator = " "
    return "".join(parts)


# --- the check -------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunFacts:
    """What the tools actually produced. Lookups that cost a query are callables, asked only when needed."""

    ticket_numbers: Callable[[], frozenset[str]]  # "TKT-12": made in this run, or this customer's existing ones
    handoff_done: Callable[[], bool]  # this run handed over (a handoff receipt), or the conversation is with the team
    any_success: bool  # some tool call of this run succeeded (a lookup's data may back what is said)
    last_call_failed: str | None  # the tool whose call failed most recently, with no success after it
    # a ticket built-in (its receipt: tools/builtins.py `Receipt`) or one of the business's own action tools
    # succeeded: "I've opened a ticket" may be true
    ticket_made: bool = False
    # every number a successful tool result of this run holds under a ticket-like key (the business's helpdesk may
    # have ticket numbers)
    numbers_seen: Callable[[], frozenset[str]] = frozenset
    # every number the customer wrote in the conversation and every number of a successful tool result: a bare
    # reference to one of them ("reference 8812") is no claim
    numbers_given: Callable[[], frozenset[str]] = frozenset


def _asked_once(facts: RunFacts) -> RunFacts:
    """The facts with each lookup asked at most once (they may cost a query; an answer may name many numbers)."""
    return dataclasses.replace(
        facts,
        ticket_numbers=functools.cache(facts.ticket_numbers),
        handoff_done=functools.cache(facts.handoff_done),
        numbers_seen=functools.cache(facts.numbers_seen),
        numbers_given=functools.cache(facts.numbers_given),
    )


class _Budget:
    """One deadline for reading a whole answer; each match gets the time left (TimeoutError when none is)."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the truthfulness check ran out of time")
        return remaining


def _number(digits: str) -> str:
    """A ticket number as text without leading zeros: 0099 -> 99 (never int(): a 5,000-digit number is a claim too,
    not a crash)."""
    return digits.lstrip("0") or "0"


def numbers_in(text: str) -> frozenset[str]:
    """Every run of digits in `text` (read as `_fold` reads them: any decimal digit as ASCII), as `_number` writes
    a ticket number."""
    return frozenset(
        _number("".join(run))
        for word in text.split()
        for digit, run in itertools.groupby(_fold(word), str.isdecimal)
        if digit
    )


_TICKET_KEY_WORDS = ("ticket", "case", "incident", "complaint", "reference", "تذكر")


def _ticket_key(key: object) -> bool:
    words = str(key).lower()
    return any(word in words for word in _TICKET_KEY_WORDS) or words in ("ref", "ref_no", "ref_number")


def _leaves(results: object) -> list[tuple[object, bool]]:
    """Every text or number in tool results, with whether it sits under a ticket-like key or label."""
    found: list[tuple[object, bool]] = []
    pending = [(results, False)]
    while pending:
        node, under_ticket = pending.pop()
        if isinstance(node, dict):
            pending.extend((value, under_ticket or _ticket_key(key)) for key, value in node.items())
        elif isinstance(node, list):
            pending.extend((value, under_ticket) for value in node)
        elif isinstance(node, (str, int, float)) and not isinstance(node, bool):
            found.append((node, under_ticket))
    return found


def ticket_numbers_in(results: object) -> frozenset[str]:
    """The numbers tool results give under a ticket-like key or label ("Ticket", "case_id", "reference"): what a
    business's own helpdesk returns. An order number is not a ticket number."""
    return frozenset(number for leaf, ticket in _leaves(results) if ticket for number in numbers_in(str(leaf)))


def all_numbers_in(results: object) -> frozenset[str]:
    """Every number tool results give, under any key (an order number, a return request's number)."""
    return frozenset(number for leaf, _ in _leaves(results) for number in numbers_in(str(leaf)))


def _shown(number: str) -> str:
    return number if len(number) <= 20 else number[:20] + "…"


def _numbered_matches(
    kind: str, text: str, pos: int, budget: _Budget, *, partial: bool = False
) -> Iterator[regex.Match[str]]:
    """The numbers presented as `kind` in `text` from `pos` on; with `partial`, the last may be one `text` ends in
    the middle of (`match.partial`): what follows may still complete it."""
    matches: Iterator[regex.Match[str]]
    if kind == "ticket code":
        matches = _TICKET_CODE_RE.finditer(text, pos, partial=partial, timeout=budget.left())
    elif kind == "ticket":
        matches = _TICKET_WORD_RE.finditer(text, pos, partial=partial, timeout=budget.left())
    elif kind == "case":
        matches = _CASE_RE.finditer(text, pos, partial=partial, timeout=budget.left())
    else:
        matches = _REFERENCE_RE.finditer(text, pos, partial=partial, timeout=budget.left())
    return matches


def _match_number(match: regex.Match[str]) -> str:
    return _number(next(group for group in reversed(match.groups()) if group))


def _numbered_claim(kind: str, match: regex.Match[str], facts: RunFacts) -> str | None:
    """The claim a number presented as a ticket's, a case's or a reference makes, or None when it is true."""
    if kind == "reference" and match.group("owner"):
        return None  # an order's (a booking's...) own number: not a case
    number = _match_number(match)
    if kind == "ticket code":
        return None if f"TKT-{number}" in facts.ticket_numbers() else f"ticket TKT-{_shown(number)}"
    if f"TKT-{number}" in facts.ticket_numbers() or number in facts.numbers_seen():
        return None
    if kind == "reference" and number in facts.numbers_given():
        return None
    return f"{kind} {_shown(number)}"


def unverified_claims(text: str, facts: RunFacts) -> list[str]:
    claims: list[str] = []
    try:
        budget = _Budget(CHECK_BUDGET_S)
        _find_claims(_read(text, budget), _asked_once(facts), claims, budget)
    except TimeoutError:
        if UNCHECKED_CLAIM not in claims:
            claims.append(UNCHECKED_CLAIM)
    return claims


def _find_claims(text: str, facts: RunFacts, claims: list[str], budget: _Budget) -> None:
    def add(claim: str) -> None:
        if claim not in claims:
            claims.append(claim)

    named: set[str] = set()  # a number claimed once is listed once ("TKT-12 ... ticket 12")
    for kind in _NUMBERED_KINDS:
        for match in _numbered_matches(kind, text, 0, budget):
            claim = _numbered_claim(kind, match, facts)
            if claim and (number := _match_number(match)) not in named:
                named.add(number)
                add(claim)
    for sentence in _SENTENCE_SPLIT_RE.split(text, timeout=budget.left()):
        _sentence_claims(sentence, facts, add, budget)


def _sentence_claims(sentence: str, facts: RunFacts, add: Callable[[str], None], budget: _Budget) -> None:
    """The claims one sentence makes on its own (the numbered ones are found over the whole answer)."""
    if not sentence.strip():
        return
    condition = _CONDITION_RE.search(sentence, timeout=budget.left())
    if condition:
        sentence = sentence[condition.end() :]
    if not sentence.strip() or _ADMISSION_RE.search(sentence, timeout=budget.left()):
        return
    if _HANDOFF_RE.search(sentence, timeout=budget.left()) and not facts.handoff_done():
        add("handoff to the team")
    elif (
        not condition  # "If you email us, our team will get back to you" describes, it doesn't promise
        and _FOLLOW_UP_RE.search(sentence, timeout=budget.left())
        and not facts.ticket_made
        and not facts.handoff_done()
    ):
        add("the team's follow-up, with no ticket or handoff")
    change = _CHANGE_RE.search(sentence, timeout=budget.left())
    said_done = _DONE_RE.search(_NOT_DONE_RE.sub(" ", sentence, timeout=budget.left()), timeout=budget.left())
    if facts.last_call_failed and (change or said_done):
        add(f"success right after {facts.last_call_failed} failed")
    elif change and not facts.any_success:
        add(f"action claimed without a tool: {change.group(0)!r}")
    elif not facts.ticket_made and _TICKET_CLAIM_RE.search(sentence, timeout=budget.left()):
        # Another tool's success (a lookup, a handoff) doesn't make a ticket.
        add("ticket claimed without a ticket tool")


# --- streaming: what may be shown while the answer is written --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AnswerEnd:
    """What `AnswerStream.finish()` says: the rest of the answer to show ("" when claims remain) and the claims
    `unverified_claims` finds in the whole answer (the engine's verdict: empty, or a push-back and a reset)."""

    delta: str
    claims: list[str]


# How far before the earliest place a number pattern may still match the scanned text is kept: its look-behinds
# read at most 8 characters (`_NOT_A_CASE`); one that reads less than it should only finds more.
_CONTEXT = 16


class AnswerStream:
    """The truthfulness guard over an answer as the model writes it (see the module docstring).

    `feed(chunk)` answers the text that became safe to show with this chunk ("" when none did): whole sentences
    that passed the per-sentence checks and in which no numbered claim can still begin. `finish()` checks the whole
    answer and answers the rest, or the claims. Joined, what `feed` and `finish` answered is the answer stripped, as
    the engine stores it; whatever they answered before `finish()` is a prefix of it that holds no claim. Each
    sentence is checked once when it is complete and the number scan restarts where a match may still begin, so the
    work is linear in the answer; it shares the one time budget of a whole-answer check (`CHECK_BUDGET_S`): past it,
    nothing more is released before `finish()`.
    """

    def __init__(self, facts: RunFacts) -> None:
        self._facts = _asked_once(facts)
        self._reader = _Reader()
        self._answer: list[str] = []  # every chunk, for the whole-answer check
        self._unshown: list[str] = []  # the answer after what was released
        self._shown: list[str] = []
        self._shown_end = 0  # where the released text ends in the answer
        self._safe_end = 0  # where the text that may be released ends in the answer
        self._sentence: list[str] = []  # the words of the sentence being written
        self._sentence_end = 0  # where its last word ends in the answer
        # The complete sentences not yet released: where each ends in the sentences' own coordinates (each sentence
        # followed by one space) and in the answer; `_text` holds them from `_base` on, for the number scan, which
        # resumes for each pattern where it may still match (`_resume`).
        self._held: deque[tuple[int, int]] = deque()
        self._text = " "  # one character of context before the first sentence
        self._base = -1
        self._resume = dict.fromkeys(_NUMBERED_KINDS, 0)
        self._blocked = False  # a sentence is a claim (or no time is left): nothing more before finish()
        self._allowance = CHECK_BUDGET_S
        self._finished = False

    @property
    def shown(self) -> str:
        """Everything released so far, joined."""
        return "".join(self._shown)

    def feed(self, chunk: str) -> str:
        if self._finished:
            raise RuntimeError("the answer was finished")
        self._answer.append(chunk)
        self._unshown.append(chunk)
        if self._blocked or not chunk:
            return ""
        started = time.monotonic()
        try:
            budget = _Budget(self._allowance)
            for piece in self._reader.feed(chunk, budget):
                self._take(piece, budget)
                if self._blocked:
                    break
        except TimeoutError:
            self._blocked = True
        finally:
            self._allowance -= time.monotonic() - started
        return self._release(self._safe_end)

    def finish(self) -> AnswerEnd:
        """The whole answer's verdict, from the same check the engine runs on a finished answer."""
        if self._finished:
            raise RuntimeError("the answer was finished")
        self._finished = True
        claims = unverified_claims("".join(self._answer), self._facts)  # lookups already asked are not asked again
        if claims:
            return AnswerEnd("", claims)
        rest = "".join(self._unshown).rstrip()
        return AnswerEnd(self._release(self._shown_end + len(rest)), [])

    def _take(self, piece: _Word | None, budget: _Budget) -> None:
        if piece is _BREAK:
            if self._sentence:
                self._complete(budget)
            return
        if self._sentence:
            self._sentence.append(" ")
        self._sentence.append(piece.text)
        self._sentence_end = piece.end
        # The reader gives a word once whitespace follows it: after a sentence's end, the sentence is complete.
        if piece.text[-1] in _SENTENCE_ENDS:
            self._complete(budget)

    def _complete(self, budget: _Budget) -> None:
        sentence = "".join(self._sentence)
        self._sentence = []
        claims: list[str] = []
        _sentence_claims(sentence, self._facts, claims.append, budget)
        if claims:
            self._blocked = True
            return
        start = self._base + len(self._text)
        self._text += sentence + " "
        self._held.append((start + len(sentence), self._sentence_end))
        self._scan(budget)

    def _scan(self, budget: _Budget) -> None:
        """Reads the numbers of the held sentences from where each pattern may still match; releases the sentences
        that end before the earliest such place."""
        for kind in _NUMBERED_KINDS:
            resume = self._base + len(self._text)  # nothing may still match before the next sentence
            for match in _numbered_matches(kind, self._text, self._resume[kind] - self._base, budget, partial=True):
                if match.partial:  # the text ends inside it: what follows may complete it
                    resume = self._base + match.start()
                    break
                if _numbered_claim(kind, match, self._facts):
                    self._blocked = True
                    return
            self._resume[kind] = resume
        safe = min(self._resume.values())
        while self._held and self._held[0][0] <= safe:
            self._safe_end = self._held.popleft()[1]
        drop = safe - _CONTEXT - self._base
        if drop > 0:
            self._text = self._text[drop:]
            self._base += drop

    def _release(self, end: int) -> str:
        if end <= self._shown_end:
            return ""
        unshown = "".join(self._unshown)
        delta, rest = unshown[: end - self._shown_end], unshown[end - self._shown_end :]
        if not self._shown:
            delta = delta.lstrip()  # the engine strips the answer
        self._unshown = [rest]
        self._shown_end = end
        self._shown.append(delta)
        return delta


def history_notice(claims: list[str]) -> str:
    """What the model is told after an earlier answer of the session that kept unverified claims (the chat widget
    showed the customer a neutral reply instead): so that it doesn't go on as if they were true."""
    listed = "; ".join(str(claim) for claim in claims)
    return (
        f"Your answer above claimed something no tool result confirmed ({listed}): it did not happen, and the "
        "customer may not have been shown that answer. Don't build on it or repeat it as done."
    )


def pushback_notice(claims: list[str], attempt: int) -> str:
    listed = "; ".join(claims)
    repeat = "This is a repeat: " if attempt > 1 else ""
    return (
        f"{repeat}Your answer claims something no tool in this reply produced ({listed}). Announcing an action is "
        "not doing it: confirmations, ticket numbers and handoffs come only from tool results. Either call the tool "
        "now, or tell the customer plainly what you did and did not do."
    )
