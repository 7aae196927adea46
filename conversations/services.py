"""Who holds a conversation: the one writer of a session's status (SPEC §4 "Live handoff"). It goes to the team
(`to_team`: a handoff, or a person of the team wrote into it) and back to the agent, or is closed
(`set_status`, `session_update`: its open handoffs close with it, through the desk's facts). Each change is
recorded for the conversation's event stream (`session.updated`) in the caller's transaction. The desk and the run
both change a conversation through here."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from conversations.models import Session
from conversations.session_events import record_updated
from kagent.errors import Unprocessable
from tools import builtins


def session_locked(session_id: str) -> Session:
    """The session's row, FOR NO KEY UPDATE (as a new run takes it: rows that refer to it take FOR KEY SHARE)."""
    return Session.objects.select_for_update(no_key=True, of=("self",)).select_related("end_user").get(pk=session_id)


def to_team(session: Session, now: Any, *, waiting: bool = True) -> None:
    """The conversation goes to the team (a handoff, or a person of the team wrote into it): the agent keeps quiet
    until it is handed back. `session.updated` when it changed. Inside the caller's transaction, with the session's
    row held (`session_locked`)."""
    if session.status == Session.Status.HANDED_OFF:
        return
    session.status = Session.Status.HANDED_OFF
    session.handed_off_at = now
    # A handoff leaves the customer waiting for the team; a team's own message answers them (`waiting=False`).
    session.waiting_since = (session.waiting_since or now) if waiting else None
    session.last_activity_at = now
    session.save(update_fields=["status", "handed_off_at", "waiting_since", "last_activity_at"])
    record_updated(session)


def set_status(session: Session, status: str) -> None:
    """Hands the conversation back to the agent (`open`) or closes it: its open handoffs close (`handoff.closed`),
    nobody waits for the team any more. `session.updated` when it changed. Inside the caller's transaction, with
    the session's row held."""
    builtins.desk().close_handoffs(session.pk)
    if session.status == status and session.waiting_since is None:
        return
    changed = session.status != status
    session.status, session.waiting_since = status, None
    session.save(update_fields=["status", "waiting_since"])
    if changed:
        record_updated(session)


def session_update(*, session: Session, status: str) -> Session:
    """`PATCH /v1/sessions/{id}`: `open` hands the conversation back to the agent (the next run's history holds
    what the customer and the team said meanwhile), `closed` closes it."""
    if status not in (Session.Status.OPEN, Session.Status.CLOSED):
        raise Unprocessable(
            "invalid_request",
            'status is "open" (hand the conversation back to the agent) or "closed".',
            details=[{"path": "$.status", "message": 'one of "open", "closed"'}],
        )
    with transaction.atomic():
        current = session_locked(session.pk)
        set_status(current, status)
    return current
