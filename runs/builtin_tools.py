"""Running the built-in tools. Each returns exactly what the model is shown; each is idempotent per tool call id, so
a retry after a crash finds the ticket or handoff it already made instead of making a second one."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.knowledge.results import search_result
from agents.knowledge.terms import query_terms
from agents.selectors import knowledge_search
from runs import webhooks
from runs.models import Handoff, Run, Session, Ticket, TicketCounter, ToolCall

SEARCH_RESULTS = 3


def _lock_session_first(run: Run) -> None:
    """Takes the session's row before a desk row refers to the run and the session. The foreign keys are checked in
    the INSERT (runs/migrations/0010), the run's before the session's: without this, a new message on the session
    (run_create: the session's row FOR UPDATE, then the open run's to supersede it) and this INSERT (the run's row
    FOR KEY SHARE, then the session's) wait for each other."""
    if run.session_id is not None:
        list(Session.objects.select_for_update(no_key=True).filter(pk=run.session_id).values_list("pk"))


def _transfer_to_human(run: Run, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    handoff = Handoff.objects.filter(tool_call_id=call.id).first()
    if handoff is None:
        _lock_session_first(run)
        handoff = Handoff.objects.create(
            project_id=run.project_id,
            session_id=run.session_id,
            run=run,
            end_user_id=run.end_user_id,
            reason_type=args["reason_type"],
            summary=args["summary"],
            tool_call_id=call.id,
            is_test=run.sandbox,
        )
        if run.session_id is not None:
            Session.objects.filter(pk=run.session_id).update(status=Session.Status.HANDED_OFF)
        webhooks.handoff_event(handoff, "handoff.created")
    return {
        "ok": True,
        "handoff": {"id": handoff.id, "status": handoff.status},
        "message": "The conversation is now in the team's queue. Tell the customer a person from the team will "
        "continue here; don't promise a time.",
    }


def _create_ticket(run: Run, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    ticket = Ticket.objects.filter(tool_call_id=call.id).first()
    if ticket is None:
        _lock_session_first(run)
        counter, _ = TicketCounter.objects.get_or_create(project_id=run.project_id)
        counter = TicketCounter.objects.select_for_update().get(pk=counter.pk)
        counter.last_number += 1
        counter.save(update_fields=["last_number"])
        ticket = Ticket.objects.create(
            project_id=run.project_id,
            number=counter.last_number,
            title=args["title"],
            description=args["description"],
            priority=args.get("priority", "normal"),
            resolution_attempted=args.get("resolution_attempted", ""),
            end_user_id=run.end_user_id,
            session_id=run.session_id,
            run=run,
            rate_key=run.rate_key,
            tool_call_id=call.id,
            is_test=run.sandbox,
        )
        webhooks.ticket_event(ticket, "ticket.created")
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
