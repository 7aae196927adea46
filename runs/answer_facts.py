"""What the truthfulness guard checks a run's answer against (guard/facts.py `Facts`), from what the engine holds.

Sources of a fact (SPEC §5): the agent's instructions (the system prompt as the model read it: instructions,
variables, and each offered tool's description with the business's rules for it), the customer's messages, the
team's messages and the agent's earlier answers that passed the guard (the session's history), and every tool
result of the run — a knowledge passage retrieved by `search_knowledge` among them. What backs an action: this run's
calls, then (a query, asked only when those don't back a claim) the calls of the segment's earlier runs; a handoff
also when the team holds the conversation; a ticket's number also among the customer's tickets (the desk).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from guard import Call, Facts
from llm.types import Message
from runs.models import Run, ToolCall
from tools import builtins
from tools.builtin_tool import Receipt

# How conversations/services.py `team_notice` writes a team member's message into the history.
TEAM_NOTICE_MARK = " from the team wrote to the customer (not you; not a tool result): "
KNOWLEDGE_TOOL = "search_knowledge"


def call_of(call: ToolCall) -> Call:
    builtin = builtins.get(call.name)
    receipt = builtin.receipt if builtin is not None else None
    return Call(
        name=call.name or call.requested_name,
        effect=call.effect or ("read" if call.name == KNOWLEDGE_TOOL else ""),
        succeeded=call.status == ToolCall.Status.SUCCEEDED,
        result=call.result,
        receipt=str(receipt) if isinstance(receipt, Receipt) else None,
        builtin=builtin is not None,
        knowledge=call.name == KNOWLEDGE_TOOL,
        # Refused because the same call already succeeded: no failure. A call still open failed nothing either.
        refused_as_duplicate=call.policy_code == "duplicate_call" or call.status not in _ENDED,
    )


_ENDED = (ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED, ToolCall.Status.REFUSED)


def _history_sources(transcript: Sequence[Message]) -> tuple[list[str], list[str]]:
    """(the customer's messages, the team's messages and the agent's answers that no notice doubted)."""
    customer: list[str] = []
    others: list[str] = []
    for position, message in enumerate(transcript):
        if message.role == "user":
            customer.append(message.content)
        elif message.role == "notice" and TEAM_NOTICE_MARK in message.content:
            others.append(message.content.split(TEAM_NOTICE_MARK, 1)[1])
        elif message.role == "assistant" and message.content and not message.tool_calls:
            doubted = position + 1 < len(transcript) and transcript[position + 1].role == "notice"
            if not doubted:
                others.append(message.content)
    return customer, others


def answer_facts(
    run: Run, *, calls: Sequence[ToolCall], transcript: Sequence[Message], instructions: Sequence[str]
) -> Facts:
    customer, others = _history_sources(transcript)

    def earlier_calls() -> list[Call]:
        if run.segment_id is None:
            return []
        rows = (
            ToolCall.objects.filter(project_id=run.project_id, rate_key=run.rate_key, run__segment_id=run.segment_id)
            .exclude(run_id=run.pk)
            .order_by("created_at", "round", "index")[:200]
        )
        return [call_of(row) for row in rows]

    def ticket_numbers() -> frozenset[str]:
        earlier = builtins.desk().ticket_numbers(project_id=run.project_id, rate_key=run.rate_key, is_test=run.sandbox)
        return frozenset(f"TKT-{number}" for number in earlier)

    def handed_off() -> bool:
        return run.session_id is not None and builtins.desk().handed_off(
            project_id=run.project_id, session_id=run.session_id
        )

    return Facts(
        instructions=tuple(instructions),
        customer=tuple(customer),
        others=tuple(others),
        calls=tuple(call_of(call) for call in calls),
        earlier_calls=earlier_calls,
        ticket_numbers=ticket_numbers,
        handed_off=handed_off,
    )


def claims_output(text: str, claims: Sequence[Any]) -> dict[str, Any]:
    """A completed run's `output`: the answer, its claims' texts (`unverified_claims`) and the claims themselves."""
    return {
        "text": text,
        "unverified_claims": [claim.text for claim in claims],
        "claims": [claim.to_dict() for claim in claims],
    }
