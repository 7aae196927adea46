"""The truthfulness guard: a run may not end on a confirmation the tools did not produce.

SPEC §5: a ticket number, a handoff, or success claimed by no tool — or a "done" right after a failed call — is
pushed back to the model (at most twice) and, if still there, listed in the output's `unverified_claims`.
An honest admission is accepted at once (kdeps, "Failed tool calls are fed back to the model"): it is read per
sentence, so "Sorry for the wait! I've cancelled your order." is still a claim.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tools.arabic import normalize_digits

MAX_PUSHBACKS = 2

_AR = "\u0600-\u06ff"
_NOT_AR_BEFORE = f"(?<![{_AR}])"
_OBJECT = r"(?:you|this|your\s+\w+|the\s+(?:conversation|chat|case|request)|it)"
_CHANGE_VERBS = (
    r"cancell?ed|updated|changed|booked|created|submitted|processed|refunded|issued|scheduled|rescheduled|reset|"
    r"opened|confirmed|applied|removed|deleted|placed|sent|activated|deactivated|upgraded|downgraded"
)
_ADVERBS = r"(?:(?:just|now|already|successfully|also|gone ahead and|went ahead and)\s+)*"

_TICKET_CODE_RE = re.compile(r"\bTKT[-\s]?0*(\d+)\b", re.IGNORECASE)
_TICKET_WORD_RE = re.compile(
    r"\bticket\s*(?:number|no\.?|id|#)?\s*(?:is|was|:)?\s*#?\s*(?:TKT-?)?0*(\d{2,})\b"
    rf"|{_NOT_AR_BEFORE}(?:ال)?تذكرة\s*(?:رقم)?\s*:?\s*#?\s*0*(\d+)"
    rf"|{_NOT_AR_BEFORE}رقم\s+(?:ال)?تذكرة\s*(?:هو|هي)?\s*:?\s*#?\s*0*(\d+)",
    re.IGNORECASE,
)
_HANDOFF_RE = re.compile(
    rf"\b(?:I|we)(?:'ve|'re| have| are)?\s+{_ADVERBS}(?:transferred|escalated|handed|passed|connected|forwarded)"
    rf"\s+{_OBJECT}\b"
    rf"|\b(?:I'm|I am|we're|we are)\s+(?:now\s+)?(?:transferring|connecting|escalating|handing|passing)\s+{_OBJECT}\b"
    r"|\b(?:you|this|your\s+\w+|the\s+(?:conversation|chat|case|request))\s+(?:has|have|is|are)\s+(?:now\s+)?"
    r"(?:been\s+)?(?:transferred|escalated|handed over|passed on|forwarded)\b"
    r"|\b(?:a|an|our)\s+(?:human|live|support)?\s*(?:agent|representative|team member|specialist|colleague)s?\s+"
    r"(?:will|is going to|are going to)\s+(?:join|take over|contact|be with|reach out|get back|continue)\b"
    rf"|{_NOT_AR_BEFORE}(?:تم\s+تحويل|قمت\s+بتحويل|سيتم\s+تحويل|حولت|حوّلت|تم\s+تصعيد|قمت\s+بتصعيد|سيتم\s+تصعيد"
    r"|تم\s+نقل\s+(?:محادثتك|المحادثة|طلبك)|سيتواصل\s+معك|سيقوم\s+أحد)",
    re.IGNORECASE,
)
_CHANGE_RE = re.compile(
    rf"\b(?:I|we)(?:'ve| have)?\s+{_ADVERBS}(?:{_CHANGE_VERBS})\b"
    rf"|\b(?:has|have)\s+(?:now\s+|just\s+)?been\s+(?:successfully\s+)?(?:{_CHANGE_VERBS})\b"
    rf"|\bis\s+now\s+(?:{_CHANGE_VERBS})\b"
    rf"|{_NOT_AR_BEFORE}(?:تم\s+(?:ال)?(?:إلغاء|الغاء|تحديث|تغيير|إرسال|ارسال|تأكيد|تاكيد|حجز|استرداد|إنشاء|انشاء|فتح|حذف)"
    r"|تم\s+بنجاح|تمت\s+العملية|ألغيت|الغيت|حدثت\s+طلبك)",
    re.IGNORECASE,
)
_DONE_RE = re.compile(r"\b(?:done|all set|successfully|completed|taken care of)\b|تم\s+بنجاح|تمت", re.IGNORECASE)
_ADMISSION_RE = re.compile(
    r"\b(?:couldn't|could not|can't|cannot|unable|wasn't able|was not able|not able|didn't work|did not work|"
    r"didn't go through|did not go through|failed|wasn't possible|was not possible|haven't been able)\b"
    rf"|{_NOT_AR_BEFORE}(?:لم\s+أتمكن|لم\s+اتمكن|لم\s+نتمكن|تعذر|تعذّر|فشل|لا\s+أستطيع|لا\s+يمكنني)",
    re.IGNORECASE,
)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?؟。])\s+|\n+")


@dataclass(frozen=True)
class RunFacts:
    """What the tools actually produced. Lookups that cost a query are callables, asked only when needed."""

    ticket_numbers: Callable[[], frozenset[str]]  # "TKT-12": made in this run, or this customer's existing ones
    handoff_done: Callable[[], bool]  # this run handed over, or the conversation already is with the team
    any_success: bool  # some tool call of this run succeeded (a lookup's data may back what is said)
    last_call_failed: str | None  # the tool whose call failed most recently, with no success after it


def _sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE_SPLIT_RE.split(text) if part.strip()]


def unverified_claims(text: str, facts: RunFacts) -> list[str]:
    text = normalize_digits(text)
    claims: list[str] = []

    def add(claim: str) -> None:
        if claim not in claims:
            claims.append(claim)

    named: set[int] = set()
    for match in _TICKET_CODE_RE.finditer(text):
        named.add(int(match.group(1)))
        if f"TKT-{int(match.group(1))}" not in facts.ticket_numbers():
            add(f"ticket TKT-{int(match.group(1))}")
    for match in _TICKET_WORD_RE.finditer(text):
        number = int(next(group for group in match.groups() if group))
        if number not in named and f"TKT-{number}" not in facts.ticket_numbers():
            named.add(number)
            add(f"ticket {number}")

    for sentence in _sentences(text):
        if _ADMISSION_RE.search(sentence):
            continue
        if _HANDOFF_RE.search(sentence) and not facts.handoff_done():
            add("handoff to the team")
        change = _CHANGE_RE.search(sentence)
        if facts.last_call_failed and (change or _DONE_RE.search(sentence)):
            add(f"success right after {facts.last_call_failed} failed")
        elif change and not facts.any_success:
            add(f"action claimed without a tool: {change.group(0)!r}")
    return claims


def pushback_notice(claims: list[str], attempt: int) -> str:
    listed = "; ".join(claims)
    repeat = "This is a repeat: " if attempt > 1 else ""
    return (
        f"{repeat}Your answer claims something no tool in this reply produced ({listed}). Announcing an action is "
        "not doing it: confirmations, ticket numbers and handoffs come only from tool results. Either call the tool "
        "now, or tell the customer plainly what you did and did not do."
    )
