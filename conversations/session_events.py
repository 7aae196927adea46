"""A conversation's events (SPEC §4 "Live handoff"): rows written with what they report, read back in order for
its stream (`GET /v1/sessions/{id}/events`), and the webhook events a business relays to its own helpdesk.

`session.message.created` for every message of the session (the customer's, the agent's, the team's): its row
names the message, rendered when read (messages don't change; one deleted since, a purged `store: false` run's, is
left out). `session.updated` carries the session as it was then. The engine writes its messages' events inside its
own statements (`message_event_sql` in runs/store.py's completion); everything else, the customer's input of a new
run too, goes through `record_message` and `record_updated`, in the caller's transaction.

Webhooks: `session.updated` for every change of a customer's conversation; `session.message.created` only for
conversations that are or were with the team (`handed_off_at` set): a business relays those to its helpdesk, not
every agent turn. Test-panel sessions send none. A `store: false` run's messages send none (their content is
deleted once the run's result is returned). Each carries the object as it was when the event happened.

Streams are woken through Redis pub/sub on the session's channel once the transaction commits: conversations'
events are rare next to a run's, so every one publishes.

In order: a stream reads the events after the last id it sent, so a conversation's events must commit in the order
of their ids (an event with a lower id committed after a higher one would be skipped for good). Every writer takes
the conversation's transaction-level advisory lock (`ORDER_LOCK`) before its event's id is drawn and keeps it to its
commit. The writers outside the engine hold the session's row too, but a run's completion doesn't (it holds its run's
row, which a new message's supersede waits for: taking the session's row there would deadlock), so the advisory lock
is what orders the two. A holder of it takes no lock after it but its own rows'.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.http.response import HttpResponseBase

from conversations.models import Message, Session, SessionEvent
from conversations.resources import MESSAGE, SESSION
from hooks import outbox
from kagent.pubsub import Event, redis_client
from kagent.sql import execute
from kagent.streams import StreamPlaces, response

logger = logging.getLogger(__name__)

BATCH = 200
T = SessionEvent.Type


def channel(session_id: str) -> str:
    return f"kagent:session:{session_id}"


def publish(session_id: str) -> None:
    try:
        redis_client().publish(channel(session_id), "1")
    except Exception:  # a stream that misses the wake-up looks again within its keep-alive period
        logger.warning("could not publish an event of session %s", session_id, exc_info=True)


def notify(session_id: str) -> None:
    """Wakes the session's open streams after the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: publish(session_id))


def _relayed(session: Session) -> bool:
    """Whether the session's messages go to the business's webhooks: a customer's conversation that is or was with
    the team."""
    return session.handed_off_at is not None and not session.is_test


def message_data(message: Message) -> dict[str, Any]:
    return MESSAGE.render(message)


def message_json(message: Message) -> str:
    return json.dumps(message_data(message), ensure_ascii=False)


ORDER_KEY = "kagent:session-events:"
ORDER_LOCK = "pg_advisory_xact_lock(hashtextextended({key}, 0))"


def _in_order(session_id: str) -> None:
    execute(f"SELECT {ORDER_LOCK.format(key='%(key)s')}", {"key": ORDER_KEY + session_id})


def record_message(message: Message, session: Session, *, relayed: bool = True) -> None:
    """`session.message.created` for a message just written, in the caller's transaction; its webhook event when the
    conversation is or was with the team (`session` as the caller holds it, `handed_off_at` up to date) and
    `relayed` (False: a `store: false` run's)."""
    _in_order(session.pk)
    SessionEvent.objects.create(session_id=session.pk, type=T.MESSAGE_CREATED, ref=message.pk)
    if relayed and _relayed(session):
        outbox.record(
            project_id=session.project_id,
            event_type=T.MESSAGE_CREATED,
            object_id=message.pk,
            data=lambda: message_data(message),
        )
    notify(session.pk)


def record_updated(session: Session) -> None:
    """`session.updated` with the session as it is now (the caller wrote the change and holds it in `session`)."""
    data = SESSION.render(session)
    _in_order(session.pk)
    SessionEvent.objects.create(session_id=session.pk, type=T.UPDATED, data=data)
    if not session.is_test:
        outbox.record(project_id=session.project_id, event_type=T.UPDATED, object_id=session.pk, data=lambda: data)
    notify(session.pk)


def last_id(session_id: str) -> int:
    """The id of the session's latest event (0: none yet): where a page rendered now starts following it."""
    return SessionEvent.objects.filter(session_id=session_id).order_by("-id").values_list("id", flat=True).first() or 0


def after(session_id: str, last: int) -> list[Event]:
    """The session's events after `last`, oldest first (at most BATCH), with their data."""
    rows = list(SessionEvent.objects.filter(session_id=session_id, id__gt=last).order_by("id")[:BATCH])
    refs = [row.ref for row in rows if row.ref]
    messages = {message.pk: message for message in Message.objects.filter(pk__in=refs)} if refs else {}
    events = []
    for row in rows:
        if row.type == T.MESSAGE_CREATED:
            message = messages.get(row.ref)
            if message is not None:
                events.append(Event(row.id, row.type, message_data(message)))
        elif row.data is not None:
            events.append(Event(row.id, row.type, row.data))
    return events


# --- inside the engine's statements --------------------------------------------------------------------------------


def message_event_sql(source: str, *, message_param: str) -> str:
    """An INSERT of `session.message.created` for the message `message_param` of the session of the CTE `source`
    (columns `session_id`), when it has one."""
    # Built from the engine's own names (the CTE, the parameter's name): every value is a bound parameter. The
    # lock is taken for the row the INSERT reads, before the row's id is drawn.
    lock = ORDER_LOCK.format(key=f"'{ORDER_KEY}' || {source}.session_id")
    return (
        "INSERT INTO runs_sessionevent (session_id, type, ref, created_at) "  # noqa: S608
        f"SELECT {source}.session_id, '{T.MESSAGE_CREATED.value}', %({message_param})s, now() FROM {source} "
        f"CROSS JOIN LATERAL (SELECT {lock}) AS ordered WHERE {source}.session_id IS NOT NULL"
    )


def relayed_sql(source: str, *, message_param: str) -> str:
    """A CTE's query: the message `message_param` as the outbox's source (`id`, `project_id`, `sandbox`) when the
    session of the run in `source` (columns `session_id`, `project_id`, `sandbox`, `store`) is or was with the team
    and the run keeps its content."""
    return (
        f"SELECT %({message_param})s AS id, {source}.project_id, {source}.sandbox FROM {source} "  # noqa: S608
        f"JOIN runs_session AS relayed ON relayed.id = {source}.session_id "
        f"WHERE relayed.handed_off_at IS NOT NULL AND NOT relayed.is_test AND {source}.store"
    )


@dataclass
class SessionSource:
    """A conversation's events, for its stream (kagent/streams.py): every one of them wakes its streams; a
    conversation never ends for good (a closed one opens again), so its stream ends only by its time limit."""

    session_id: str

    @property
    def channel(self) -> str:
        return channel(self.session_id)

    def next(self, last: int) -> tuple[list[Event], bool]:
        return after(self.session_id, last), False

    def follow(self, *, first: bool) -> None:
        pass


def session_event_stream(session_id: str, places: StreamPlaces, *, after: int) -> HttpResponseBase:
    """The conversation's events from `after` on, as Server-Sent Events (SPEC §4 "Live handoff")."""
    return response(SessionSource(session_id), places, after=after)
