"""What the model is told about claims: a push-back of its answer, and a notice in a later run's history."""

from __future__ import annotations

from collections.abc import Sequence

from guard.claims import UNBACKED_ACTION, UNCHECKED, UNGROUNDED_FIGURE, UNGROUNDED_REFERENCE, Claim

MAX_PUSHBACKS = 2

_WHAT = {
    UNBACKED_ACTION: "an action said to be done that no tool call did",
    UNGROUNDED_REFERENCE: (
        "a reference number or code that no tool result, passage, instruction or customer message gives"
    ),
    UNGROUNDED_FIGURE: "a figure that no tool result, passage, instruction or customer message gives",
    UNCHECKED: "an answer too long or too odd to be checked",
}


def _listed(claims: Sequence[Claim]) -> str:
    return "; ".join(
        f"{_WHAT.get(claim.kind, claim.kind)}"
        + (f", right after {claim.after_failure} failed" if claim.after_failure else "")
        + f": {claim.text!r}"
        for claim in claims
    )


def pushback_notice(claims: Sequence[Claim], attempt: int) -> str:
    repeat = "This is a repeat: " if attempt > 1 else ""
    return (
        f"{repeat}Your answer states something nothing in this conversation backs ({_listed(claims)}). Announcing "
        "an action is not doing it: confirmations, ticket numbers and handoffs come only from tool results, and "
        "numbers, amounts, dates and time frames only from a tool result, a knowledge passage, your instructions or "
        "the customer's own words. Either call the tool now, or tell the customer plainly what you did and did not "
        "do, without numbers you don't have."
    )


def history_notice(claims: Sequence[str]) -> str:
    """What the model is told after an earlier answer of the session that kept unverified claims (the chat widget
    showed the customer a neutral reply instead): so that it doesn't go on as if they were true."""
    listed = "; ".join(str(claim) for claim in claims)
    return (
        f"Your answer above claimed something no tool result confirmed ({listed}): it did not happen, and the "
        "customer may not have been shown that answer. Don't build on it or repeat it as done."
    )
