"""The truthfulness guard: a run may not end on a confirmation the tools did not produce.

SPEC §5: a ticket number, a handoff, or success claimed by no tool — or a "done" right after a failed call — is
pushed back to the model (at most twice) and, if still there, listed in the output's `unverified_claims`.
An honest admission is accepted at once (kdeps, "Failed tool calls are fed back to the model"): it is read per
sentence, so "Sorry for the wait! I've cancelled your order." is still a claim.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

import regex

from tools.arabic import normalize_digits

MAX_PUSHBACKS = 2

# The patterns below read a model's answer, which anyone can steer (a tenant's own base_url, a prompt-injected model,
# the demo model echoing the customer). Two guarantees, either enough on its own:
# - linear by construction: the answer is squeezed first (`_squeeze`: every run of whitespace becomes one space or
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
# Typographic apostrophes as the ASCII one the patterns use ("I’ve" is "I've").
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_OBJECT = r"(?:you|this|your\s+\w+|the\s+(?:conversation|chat|case|request)|it)"
_CHANGE_VERBS = (
    r"cancell?ed|updated|changed|booked|created|submitted|processed|refunded|issued|scheduled|rescheduled|reset|"
    r"opened|raised|logged|filed|lodged|registered|confirmed|applied|removed|deleted|placed|sent|activated|deactivated|upgraded|downgraded"
)
_OWN_THINGS = r"(?:opening\s+)?(?:hours|website|site|app|policy|policies|prices|pricing|menu|terms|catalogue|catalog)"
_ADVERBS = r"(?:(?:just|now|already|successfully|also|gone ahead and|went ahead and)\s+)*"

# linear: literal TKT, then one optional separator and one digit run taken whole (see the note above).
_TICKET_CODE_RE = regex.compile(r"\bTKT[-\s]?(\d+)\b", regex.IGNORECASE)
# linear: a literal word first, then optional parts separated by at most one (squeezed) whitespace character each.
_TICKET_WORD_RE = regex.compile(
    r"\bticket\s?(?:number|no\.?|id|#)?\s?(?:is|was|:)?\s?#?\s?(?:TKT-?)?(\d{2,})\b"
    rf"|{_NOT_AR_BEFORE}(?:ال)?{_AR_TICKET}\s?(?:رقم)?\s?:?\s?#?\s?(\d+)"
    rf"|{_NOT_AR_BEFORE}رقم\s(?:ال)?{_AR_TICKET}\s?(?:هو|هي)?\s?:?\s?#?\s?(\d+)",
    regex.IGNORECASE,
)
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
_SENTENCE_SPLIT_RE = regex.compile(r"(?<=[.!?؟。])\s|\n")


@dataclass(frozen=True)
class RunFacts:
    """What the tools actually produced. Lookups that cost a query are callables, asked only when needed."""

    ticket_numbers: Callable[[], frozenset[str]]  # "TKT-12": made in this run, or this customer's existing ones
    handoff_done: Callable[[], bool]  # this run handed over (a handoff receipt), or the conversation is with the team
    any_success: bool  # some tool call of this run succeeded (a lookup's data may back what is said)
    last_call_failed: str | None  # the tool whose call failed most recently, with no success after it
    # a ticket built-in (its receipt: tools/builtins.py `Receipt`) or one of the business's own action tools
    # succeeded: "I've opened a ticket" may be true
    ticket_made: bool = False
    # every number a successful tool result of this run holds (the business's helpdesk may have ticket numbers)
    numbers_seen: Callable[[], frozenset[str]] = frozenset


def _squeeze(text: str) -> str:
    """Every run of whitespace as one space, or one newline where it held a line break (see the note at the top)."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


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
    """Every run of digits in `text` (Arabic-Indic ones as ASCII), as `_number` writes a ticket number."""
    return frozenset(
        _number("".join(run)) for digit, run in itertools.groupby(normalize_digits(text), str.isdigit) if digit
    )


_TICKET_KEY_WORDS = ("ticket", "case", "incident", "complaint", "reference", "تذكر")


def _ticket_key(key: object) -> bool:
    words = str(key).lower()
    return any(word in words for word in _TICKET_KEY_WORDS) or words in ("ref", "ref_no", "ref_number")


def ticket_numbers_in(results: object) -> frozenset[str]:
    """The numbers tool results give under a ticket-like key or label ("Ticket", "case_id", "reference"): what a
    business's own helpdesk returns. An order number is not a ticket number."""
    found: set[str] = set()
    pending = [(results, False)]
    while pending:
        node, under_ticket = pending.pop()
        if isinstance(node, dict):
            pending.extend((value, under_ticket or _ticket_key(key)) for key, value in node.items())
        elif isinstance(node, list):
            pending.extend((value, under_ticket) for value in node)
        elif under_ticket and isinstance(node, (str, int)) and not isinstance(node, bool):
            found |= numbers_in(str(node))
    return frozenset(found)


def _shown(number: str) -> str:
    return number if len(number) <= 20 else number[:20] + "…"


def unverified_claims(text: str, facts: RunFacts) -> list[str]:
    claims: list[str] = []
    try:
        squeezed = _squeeze(normalize_digits(text).translate(_APOSTROPHES))
        _find_claims(squeezed, facts, claims, _Budget(CHECK_BUDGET_S))
    except TimeoutError:
        if UNCHECKED_CLAIM not in claims:
            claims.append(UNCHECKED_CLAIM)
    return claims


def _find_claims(text: str, facts: RunFacts, claims: list[str], budget: _Budget) -> None:
    def add(claim: str) -> None:
        if claim not in claims:
            claims.append(claim)

    named: set[str] = set()
    for match in _TICKET_CODE_RE.finditer(text, timeout=budget.left()):
        number = _number(match.group(1))
        named.add(number)
        if f"TKT-{number}" not in facts.ticket_numbers():
            add(f"ticket TKT-{_shown(number)}")
    for match in _TICKET_WORD_RE.finditer(text, timeout=budget.left()):
        number = _number(next(group for group in match.groups() if group))
        if number not in named and f"TKT-{number}" not in facts.ticket_numbers() and number not in facts.numbers_seen():
            named.add(number)
            add(f"ticket {_shown(number)}")

    for sentence in _SENTENCE_SPLIT_RE.split(text, timeout=budget.left()):
        if not sentence.strip():
            continue
        condition = _CONDITION_RE.search(sentence, timeout=budget.left())
        if condition:
            sentence = sentence[condition.end() :]
        if not sentence.strip() or _ADMISSION_RE.search(sentence, timeout=budget.left()):
            continue
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
        if facts.last_call_failed and (change or _DONE_RE.search(sentence, timeout=budget.left())):
            add(f"success right after {facts.last_call_failed} failed")
        elif change and not facts.any_success:
            add(f"action claimed without a tool: {change.group(0)!r}")
        elif not facts.ticket_made and _TICKET_CLAIM_RE.search(sentence, timeout=budget.left()):
            # Another tool's success (a lookup, a handoff) doesn't make a ticket.
            add("ticket claimed without a ticket tool")


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
