"""Running the built-in tools. Each returns exactly what the model is shown; each is idempotent per tool call id, so
a retry after a crash finds the ticket or handoff it already made instead of making a second one (the desk's
services make them: desk/services.py)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.knowledge.results import search_result
from agents.knowledge.terms import query_terms
from agents.selectors import knowledge_search
from desk import services as desk_services
from runs import webhooks
from runs.models import Run, Session, ToolCall

SEARCH_RESULTS = 3


def _transfer_to_human(run: Run, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    handoff = desk_services.handoff_create(
        run=run, tool_call_id=call.id, reason_type=args["reason_type"], summary=args["summary"]
    )
    return {
        "ok": True,
        "handoff": {"id": handoff.id, "status": handoff.status},
        "message": "The conversation is now in the team's queue. Tell the customer a person from the team will "
        "continue here; don't promise a time.",
    }


def _create_ticket(run: Run, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    ticket = desk_services.ticket_create(
        run=run,
        tool_call_id=call.id,
        title=args["title"],
        description=args["description"],
        priority=args.get("priority", "normal"),
        resolution_attempted=args.get("resolution_attempted", ""),
    )
    return {
        "ok": True,
        "ticket": {"number": ticket.display_number, "status": ticket.status, "priority": ticket.priority},
        "message": f"Ticket {ticket.display_number} is open. Give the customer this number.",
    }


def _flag_conversation(run: Run, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    flagged = Session.objects.filter(pk=run.session_id).update(
        flagged=True, flag_reason=args["reason"], flag_urgency=args.get("urgency", "normal"), flagged_at=timezone.now()
    )
    if flagged and run.session_id is not None and not run.sandbox:
        webhooks.flagged_event(project_id=run.project_id, session_id=run.session_id)
    return {"ok": True, "flagged": True, "message": "The conversation is flagged for the team to review."}


def _search_knowledge(run: Run, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    query = args["query"]
    hits = knowledge_search(project_id=run.project_id, agent_id=run.agent_id, query=query, limit=SEARCH_RESULTS)
    return search_result(hits, query_terms(query))


_RUNNERS = {
    "transfer_to_human": _transfer_to_human,
    "create_ticket": _create_ticket,
    "flag_conversation": _flag_conversation,
    "search_knowledge": _search_knowledge,
}


def builtin_execute(
    *, run: Run, call: ToolCall, name: str, arguments: dict[str, Any], fields: dict[str, Any]
) -> dict[str, Any]:
    """Runs the built-in and records the call (with `fields`: its policy decision) in the same transaction."""
    with transaction.atomic():
        result = _RUNNERS[name](run, call, arguments)
        ToolCall.objects.filter(pk=call.pk).update(
            status=ToolCall.Status.SUCCEEDED, result=result, finished_at=timezone.now(), **fields
        )
    call.status, call.result = ToolCall.Status.SUCCEEDED, result
    return result
