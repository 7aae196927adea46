"""Recording webhook events: the outbox (issue #11: "recorded in the same transaction as what they report").

An event is one row of `WebhookEvent`, written in the transaction (or the statement) of the change it reports, and
only when the project has an enabled endpoint subscribed to its type: a project without endpoints pays nothing (a
pause: one read, which renders its data when someone wants it), and the run engine's hot-path statements carry the
INSERT in their CTEs (`insert_sql`), guarded there by the same question, so they stay one statement each. Once the
transaction commits, `hooks.dispatch` makes the event's deliveries; the sweep dispatches what a crash left behind.
Test-panel (sandbox) runs and test objects are never recorded.

Who renders `data`: the caller, when the event is recorded, so a webhook carries the object as it was when the event
happened (the engine's statements take it as a parameter, rendered before the statement). A row without data (an
event recorded by code from before that, or whose data could not be rendered) is rendered when dispatched, by the
renderer its app registers (`register_renderer`), since this app sits below the apps whose objects it sends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hooks.models import EVENT_TYPES, EVENTS, WebhookEvent
from kagent import broker
from kagent.sql import execute

DISPATCH_TASK = "hooks.dispatch"
# A run's status events: recorded by the engine's statements with the status change (runs/run_events.py).
RUN_EVENT_TYPES = frozenset(name for name, kind in EVENTS.items() if kind.object == "run")

Renderer = Callable[[WebhookEvent], dict[str, Any] | None]
_RENDERERS: dict[str, Renderer] = {}


def register_renderer(event_type: str, renderer: Renderer) -> None:
    """`renderer(event)` gives the event's `data` when it is dispatched (None: the object is gone, nothing to send)."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown webhook event type {event_type}")
    _RENDERERS[event_type] = renderer


def renderer_for(event_type: str) -> Renderer | None:
    return _RENDERERS.get(event_type)


def insert_sql(source: str, *, id_param: str, type_param: str, data_param: str | None = None) -> str:
    """An INSERT of one event for the row of the CTE `source` (columns `id`, `project_id`, `sandbox`), only when its
    project has an enabled endpoint subscribed to the type, RETURNING the event's id: for the engine's statements.
    `data_param`: the event's data, rendered already (JSON text; NULL: rendered when dispatched)."""
    data = f"%({data_param})s::jsonb" if data_param else "NULL"
    # Built from the engine's own names (the CTE, the parameters' names): every value is a bound parameter.
    return (
        "INSERT INTO hooks_webhookevent (id, project_id, type, object_id, data, created_at) "  # noqa: S608
        f"SELECT %({id_param})s, {source}.project_id, %({type_param})s::text, {source}.id, {data}, now() "
        f"FROM {source} WHERE NOT {source}.sandbox AND EXISTS (SELECT 1 FROM hooks_webhookendpoint AS endpoint "
        f"WHERE endpoint.project_id = {source}.project_id AND endpoint.enabled "
        f"AND endpoint.event_types ? %({type_param})s::text) RETURNING id"
    )


_SUBSCRIBED_SQL = """
SELECT EXISTS (
    SELECT 1 FROM hooks_webhookendpoint
    WHERE project_id = %(project)s AND enabled AND event_types ? %(type)s
)
"""


def subscribed(project_id: str, event_type: str) -> bool:
    """Whether the project has an enabled endpoint that wants `event_type` (one query)."""
    return bool(execute(_SUBSCRIBED_SQL, {"project": project_id, "type": event_type})[0][0])


def dispatch(event_id: str) -> None:
    """Queues the event's dispatch (kagent.broker.enqueue: after commit; one lost is the sweep's)."""
    broker.enqueue(DISPATCH_TASK, event_id)


def record(
    *, project_id: str, event_type: str, object_id: str, data: Callable[[], dict[str, Any]] | None = None
) -> str | None:
    """Records an event in the caller's transaction when the project has an endpoint for it; `data()` renders the
    object now (None: rendered when dispatched, by the type's renderer). The event's id, or None when nobody wants
    it. The caller leaves test objects out."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown webhook event type {event_type}")
    if not subscribed(project_id, event_type):
        return None
    event = WebhookEvent.objects.create(
        project_id=project_id, type=event_type, object_id=object_id, data=data() if data is not None else None
    )
    dispatch(event.pk)
    return str(event.pk)
