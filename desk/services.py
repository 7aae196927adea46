"""Writes of the desk: a run's built-ins open tickets and hand conversations to the team (`ticket_create`,
`handoff_create`, called by desk/executors.py for the run engine); the team closes and reopens them
(`ticket_update`, `handoff_update`, from the API and the dashboard); a handoff takes the conversation to the team
and the last one closed closes it, through the conversation's one writer (conversations/services.py), which closes the
open handoffs of a conversation handed back (`close_handoffs`, bound as the desk's facts). Each change the business
can subscribe to is recorded for its webhooks in the same transaction (desk/webhook_events.py)."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from django.db import transaction
from django.utils import timezone

from conversations.models import Session
from conversations.services import session_locked, set_status, to_team
from desk import webhook_events
from desk.models import Handoff, Ticket, TicketCounter
from kagent.errors import Conflict, Unprocessable
from kagent.inputs import UNSET, is_set
from runs.limits import bucket_held
from runs.models import Run

# --- made by a run ------------------------------------------------------------------------------------------------


def _lock_session_first(run: Run) -> None:
    """Takes the session's row before a desk row refers to the run and the session. The foreign keys are checked in
    the INSERT (runs/migrations/0010), the run's before the session's: without this, a new message on the session
    (run_create: the session's row FOR UPDATE, then the open run's to supersede it) and this INSERT (the run's row
    FOR KEY SHARE, then the session's) wait for each other."""
    if run.session_id is not None:
        list(Session.objects.select_for_update(no_key=True).filter(pk=run.session_id).values_list("pk"))


def handoff_create(*, run: Run, tool_call_id: str, reason_type: str, summary: str) -> Handoff:
    """The handoff of a run's `transfer_to_human` call: its session goes to the team's queue (`handed_off`) and
    `handoff.created` to the business's endpoints. Once per tool call: a retry after a crash finds the handoff it
    already made. Inside the caller's transaction (the call is recorded with it)."""
    handoff = Handoff.objects.filter(tool_call_id=tool_call_id).first()
    if handoff is None:
        _lock_session_first(run)
        handoff = Handoff.objects.create(
            project_id=run.project_id,
            session_id=run.session_id,
            run=run,
            end_user_id=run.end_user_id,
            reason_type=reason_type,
            summary=summary,
            tool_call_id=tool_call_id,
            is_test=run.sandbox,
        )
        webhook_events.handoff_event(handoff, "handoff.created")
        if run.session_id is not None:
            session = session_locked(run.session_id)
            # A sandbox run's handoff is a test's: it hands over a test-panel conversation, never a customer's.
            if not run.sandbox or session.is_test:
                to_team(session, timezone.now())
    return handoff


def ticket_create(
    *,
    run: Run,
    tool_call_id: str,
    title: str,
    description: str,
    priority: str = "normal",
    resolution_attempted: str = "",
) -> Ticket:
    """The ticket of a run's `create_ticket` call, numbered `TKT-<n>` per project under the counter's row lock, for
    the run's customer (`rate_key`); `ticket.created` goes to the business's endpoints. Once per tool call: a retry
    after a crash finds the ticket it already made. Inside the caller's transaction (the call is recorded with it)."""
    ticket = Ticket.objects.filter(tool_call_id=tool_call_id).first()
    if ticket is None:
        _lock_session_first(run)
        counter, _ = TicketCounter.objects.get_or_create(project_id=run.project_id)
        counter = TicketCounter.objects.select_for_update().get(pk=counter.pk)
        counter.last_number += 1
        counter.save(update_fields=["last_number"])
        ticket = Ticket.objects.create(
            project_id=run.project_id,
            number=counter.last_number,
            title=title,
            description=description,
            priority=priority,
            resolution_attempted=resolution_attempted,
            end_user_id=run.end_user_id,
            session_id=run.session_id,
            run=run,
            rate_key=run.rate_key,
            tool_call_id=tool_call_id,
            is_test=run.sandbox,
        )
        webhook_events.ticket_event(ticket, "ticket.created")
    return ticket


# --- changed by the team ------------------------------------------------------------------------------------------


def ticket_update(*, ticket: Ticket, status: str = UNSET, priority: str = UNSET) -> Ticket:
    """Close or reopen a ticket, or change its priority; `ticket.updated` goes to the business's endpoints.

    Reopening keeps the policy check's rule of one open agent ticket per customer (SPEC §5 step 4, `runs/limits.py`):
    under the customer's bucket lock, a ticket whose customer has another open ticket is not reopened (409
    `ticket_already_open`, with that ticket's number)."""
    changes: dict[str, Any] = {
        key: value for key, value in (("status", status), ("priority", priority)) if is_set(value)
    }
    if not changes:
        return ticket
    reopening = changes.get("status") == Ticket.Status.OPEN and ticket.rate_key
    with bucket_held(ticket.project_id, ticket.rate_key) if reopening else nullcontext(), transaction.atomic():
        current = Ticket.objects.select_for_update(of=("self",)).select_related("end_user").get(pk=ticket.pk)
        changes = {key: value for key, value in changes.items() if getattr(current, key) != value}
        if not changes:
            return current
        if changes.get("status") == Ticket.Status.OPEN and current.rate_key:
            other = (
                Ticket.objects.filter(
                    project_id=current.project_id,
                    rate_key=current.rate_key,
                    status=Ticket.Status.OPEN,
                    is_test=current.is_test,
                )
                .exclude(pk=current.pk)
                .order_by("-created_at")
                .first()
            )
            if other is not None:
                raise Conflict(
                    "ticket_already_open",
                    f"This customer has {other.display_number} open; close it before reopening this ticket.",
                    details={"open_ticket": other.display_number},
                )
        if "status" in changes:
            changes["closed_at"] = timezone.now() if changes["status"] == Ticket.Status.CLOSED else None
        Ticket.objects.filter(pk=current.pk).update(**changes)
        for key, value in changes.items():
            setattr(current, key, value)
        webhook_events.ticket_event(current, "ticket.updated")
    return current


ASSIGNEE_MAX = 200


def handoff_update(*, handoff: Handoff, status: str = UNSET, assignee: str | None = UNSET) -> Handoff:
    """Close a handoff once the team has dealt with the conversation (or reopen it), and say who has it.

    The session follows: `handed_off` while one of its handoffs is open, `closed` when the last one is closed.
    Closing sends `handoff.closed` to the business's endpoints. The session's row is taken before the handoff's, the
    order of every other writer of both (a hand-back closes the open handoffs with the session's row held)."""
    with transaction.atomic():
        session = session_locked(handoff.session_id) if handoff.session_id is not None else None
        current = Handoff.objects.select_for_update(of=("self",)).select_related("end_user").get(pk=handoff.pk)
        changes: dict[str, Any] = {}
        if is_set(assignee):
            name = " ".join((assignee or "").split())
            if len(name) > ASSIGNEE_MAX:
                raise Unprocessable(
                    "invalid_request",
                    f"assignee is at most {ASSIGNEE_MAX} characters.",
                    details=[{"path": "$.assignee", "message": f"at most {ASSIGNEE_MAX} characters"}],
                )
            if name != current.assignee:
                changes["assignee"] = name
        moved = is_set(status) and status != current.status
        if moved:
            changes["status"] = status
            changes["closed_at"] = timezone.now() if status == Handoff.Status.CLOSED else None
        if not changes:
            return current
        Handoff.objects.filter(pk=current.pk).update(**changes)
        for key, value in changes.items():
            setattr(current, key, value)
        if moved and current.status == Handoff.Status.CLOSED:
            webhook_events.handoff_event(current, "handoff.closed")
        if moved and session is not None:
            still_open = Handoff.objects.filter(session_id=current.session_id, status=Handoff.Status.OPEN).exists()
            if still_open:
                to_team(session, timezone.now())
            else:
                set_status(session, Session.Status.CLOSED)
    return current


def close_handoffs(session_id: str) -> None:
    """A conversation handed back to the agent or closed (conversations/services.py `set_status`): its open handoffs
    close (`handoff.closed`). Inside the caller's transaction, with the session's row held."""
    for handoff in Handoff.objects.select_for_update().filter(session_id=session_id, status=Handoff.Status.OPEN):
        Handoff.objects.filter(pk=handoff.pk).update(status=Handoff.Status.CLOSED, closed_at=timezone.now())
        handoff.status = Handoff.Status.CLOSED
        webhook_events.handoff_event(handoff, "handoff.closed")
