"""Who holds a conversation: the one writer of a session's status (SPEC §4 "Live handoff"). It goes to the team
(`to_team`: a handoff, or a person of the team wrote into it) and back to the agent, or is closed
(`set_status`, `session_update`: its open handoffs close with it, through the desk's facts). Each change is
recorded for the conversation's event stream (`session.updated`) in the caller's transaction. The desk and the run
both change a conversation through here. Also the conversation's own writes: a session made (by an app or the test
panel) and a message written into it (by the team or the customer, not by a run).

What a team message does to the run still open there (it is superseded) belongs to the runs app, which binds it here
when it is ready (`bind_open_runs`): this app is below it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.selectors import agent_get
from conversations import session_events
from conversations.identity import EndUserClaim, identity_resolve
from conversations.models import Message, Session
from conversations.session_events import record_updated
from kagent.bindings import Binding
from kagent.errors import Unprocessable
from kagent.models import ApiKey, Project
from tools import builtins

OPEN_RUNS: Binding[Callable[[Session], None]] = Binding("the runs app's ways to end a conversation's open runs")


def bind_open_runs(supersede: Callable[[Session], None]) -> None:
    """The runs app's: ends the runs still open on a conversation (inside the caller's transaction)."""
    OPEN_RUNS.bind(supersede)


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


def session_create(
    *,
    project: Project,
    api_key: ApiKey | None,
    agent_id: str,
    end_user: EndUserClaim | None = None,
    end_user_token: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Session:
    """A conversation with one end user. `api_key` None: the dashboard."""
    agent = agent_get(project=project, agent_id=agent_id)
    identity = identity_resolve(project=project, api_key=api_key, end_user=end_user, end_user_token=end_user_token)
    return Session.objects.create(
        project=project, agent=agent, end_user=identity.end_user, created_by_key=api_key, metadata=metadata or {}
    )


MESSAGE_MAX = 20_000
AUTHOR_MAX = 100


def _text(value: str, *, name: str, limit: int) -> str:
    if not value.strip():
        message = "Write the message first." if name == "content" else f"{name} can't be empty."
        raise Unprocessable("invalid_request", message, details=[{"path": f"$.{name}", "message": "empty"}])
    if len(value) > limit:
        raise Unprocessable(
            "input_too_large" if name == "content" else "invalid_request",
            f"The {'message' if name == 'content' else name} can be at most {limit:,} characters long.",
            details=[{"path": f"$.{name}", "message": f"at most {limit} characters"}],
        )
    return value


def session_message_create(*, session: Session, role: str, content: str, author: str = "") -> Message:
    """A message written into the conversation, not by a run: the team's reply (`team`, signed `author`) or the
    customer's words (`user`). A `user` message never starts a run: while the conversation is with the team it is
    for the team (and it waits for an answer from then on). A `team` message on a conversation the agent holds
    hands it to the team, as a handoff would: its open run is superseded, the agent keeps quiet from then on."""
    content = _text(content, name="content", limit=MESSAGE_MAX)
    if role == Message.Role.TEAM:
        author = " ".join(_text(author, name="author", limit=AUTHOR_MAX).split())
    elif author:
        raise Unprocessable(
            "invalid_request",
            "author is for the team's messages; a customer's message has none.",
            details=[{"path": "$.author", "message": "only with role team"}],
        )
    with transaction.atomic():
        current = session_locked(session.pk)
        now = timezone.now()
        if role == Message.Role.TEAM:
            OPEN_RUNS.get()(current)
            to_team(current, now, waiting=False)
            current.waiting_since = None
        elif current.status == Session.Status.HANDED_OFF:
            current.waiting_since = current.waiting_since or now
        current.last_activity_at = now
        current.save(update_fields=["waiting_since", "last_activity_at"])
        message = Message.objects.create(
            project_id=current.project_id, session=current, role=role, content=content, author=author, created_at=now
        )
        session_events.record_message(message, current)
    return message


def team_notice(author: str, content: str) -> str:
    """A team message as the model reads it in the history: what a person of the business told the customer while
    the conversation was with the team (not the model's words, not a tool result: nothing it confirms is a fact the
    model may repeat as done)."""
    return f"{author or 'A person'} from the team wrote to the customer (not you; not a tool result): {content}"


def panel_session_create(*, project: Project, agent_id: str, end_user: EndUserClaim | None = None) -> Session:
    """A test-panel conversation: a session made by the dashboard, marked as a test so it stays off the desk's
    default views (its runs are sandbox runs, whose tickets and handoffs are tests too)."""
    session = session_create(project=project, api_key=None, agent_id=agent_id, end_user=end_user)
    Session.objects.filter(pk=session.pk).update(is_test=True)
    session.is_test = True
    return session
