"""The truthfulness guard: a run may not end on a confirmation the tools did not produce.

SPEC §5: a ticket number, a handoff, or success claimed by no tool in this run — or a "done" right after a failed
call — is pushed back to the model (at most twice) and, if still there, listed in the output's `unverified_claims`.
An honest admission, in any words, is accepted at once (kdeps, "Failed tool calls are fed back to the model").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_PUSHBACKS = 2

_TICKET_RE = re.compile(r"\bTKT[-\s]?(\d+)\b", re.IGNORECASE)
_TICKET_PHRASE_RE = re.compile(
    r"\b(?:ticket|case|reference)\s*(?:number|no\.?|#)\s*:?\s*#?\s*([A-Z]{0,5}-?\d{2,})\b|تذكرة\s*رقم\s*(\S+)",
    re.IGNORECASE,
)
_HANDOFF_RE = re.compile(
    r"\b(?:I(?:'ve| have)?|we(?:'ve| have)?)\s+(?:just\s+)?"
    r"(?:transferred|escalated|handed|passed|connected|forwarded)\b"
    r"|\b(?:I'm|I am|we're|we are)\s+(?:now\s+)?(?:transferring|connecting|escalating|handing)\b"
    r"|\b(?:has|have|been)\s+(?:been\s+)?(?:transferred|escalated|handed over|passed on|forwarded)\s+to\b"
    r"|\b(?:an?|our)\s+(?:human|live|support)\s+agent\s+(?:will|is going to)\s+(?:join|take over|contact|be with)\b"
    r"|تم\s+تحويل|قمت\s+بتحويل|سيتم\s+تحويلك|حولت",
    re.IGNORECASE,
)
_SUCCESS_RE = re.compile(
    r"\b(?:done|all set|successfully|completed)\b"
    r"|\b(?:I(?:'ve| have)?|we(?:'ve| have)?|has been|have been|is now|was)\s+(?:just\s+)?"
    r"(?:cancell?ed|updated|changed|booked|placed|created|submitted|processed|refunded|issued|scheduled|reset|"
    r"opened|sent|confirmed|applied|removed|added|deleted|rescheduled)\b"
    r"|تم\s+بنجاح|تمت\s+العملية|تم\s+(?:إلغاء|الغاء|تحديث|تغيير|إرسال|ارسال)",
    re.IGNORECASE,
)
_ADMISSION_RE = re.compile(
    r"\b(?:couldn't|could not|can't|cannot|unable|wasn't able|was not able|didn't work|did not work|failed|"
    r"not able|unfortunately|sorry|error|problem|issue on our side)\b|لم\s+أتمكن|لم\s+اتمكن|تعذر|فشل|للأسف|عذرا",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class RunFacts:
    """What the tools of this run actually produced."""

    ticket_numbers: frozenset[str]  # "TKT-12", from create_ticket results
    handoff_done: bool  # a transfer_to_human call succeeded
    change_succeeded: bool  # an action or escalation tool succeeded
    last_call_failed: str | None  # the tool whose call failed most recently, with no success after it


def unverified_claims(text: str, facts: RunFacts) -> list[str]:
    claims: list[str] = []
    for match in _TICKET_RE.finditer(text):
        number = f"TKT-{match.group(1)}"
        if number not in facts.ticket_numbers and f"ticket {number}" not in claims:
            claims.append(f"ticket {number}")
    for match in _TICKET_PHRASE_RE.finditer(text):
        raw = match.group(1) or match.group(2) or ""
        digits = re.sub(r"\D", "", raw)
        if digits and f"TKT-{digits}" not in facts.ticket_numbers and f"ticket TKT-{digits}" not in claims:
            claims.append(f"ticket {raw}")
    admitted = bool(_ADMISSION_RE.search(text))
    if _HANDOFF_RE.search(text) and not facts.handoff_done and not admitted:
        claims.append("handoff to the team")
    if _SUCCESS_RE.search(text) and not admitted:
        if facts.last_call_failed:
            claims.append(f"success right after {facts.last_call_failed} failed")
        elif not facts.change_succeeded and _SUCCESS_RE.search(text):
            change = _SUCCESS_RE.search(text)
            assert change is not None
            if not re.fullmatch(r"(?i)done|all set|successfully|completed", change.group(0)):
                claims.append(f"action claimed without a tool: {change.group(0)!r}")
    return claims


def pushback_notice(claims: list[str], attempt: int) -> str:
    listed = "; ".join(claims)
    repeat = "This is a repeat: " if attempt > 1 else ""
    return (
        f"{repeat}Your answer claims something no tool in this reply produced ({listed}). Announcing an action is "
        "not doing it: confirmations, ticket numbers and handoffs come only from tool results. Either call the tool "
        "now, or tell the customer plainly what you did and did not do."
    )
