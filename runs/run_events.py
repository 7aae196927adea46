"""A run's events (SPEC §4 "Run events"): rows written with what they report, read back in order for a stream.

`record` adds one in the caller's transaction (the engine's hot path writes them inside its own statements, with
`insert_sql`); `notify` wakes the run's open streams once the transaction commits (Redis pub/sub); `after` reads a
run's events after a Last-Event-ID with their data rendered as the API renders the run or the step.

Wake-ups only for runs someone follows. Most runs are never followed (the app reads the result with GET, or a
webhook tells it), so the engine's hot-path writes publish only while the run's `followed_until` is ahead: each of
them reads it back from the run's row in the statement that writes the event (`notify_if_followed`). A follower (an
event stream, a wait) subscribes, then sets `followed_until` (`follow`), then looks at the run: an engine write that
committed before the follower's UPDATE is seen by that look; one after it sees the flag and publishes, because
every such write updates or locks the run's row in its statement (a row lock orders the two, and an UPDATE or a
locking read sees the newest committed row). The rarer writes elsewhere (a cancel, a submit) always publish.

Status events carry the run as it is when the event is sent, with the status of the event (a stream that is
behind shows each status in order, and the run's fields as they are now).
"""

from __future__ import annotations

import copy
import json
import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import DateTimeField, Exists, ExpressionWrapper, F, OuterRef
from django.db.models.functions import Coalesce, Greatest, Now

from hooks import outbox
from hooks.models import WebhookEndpoint
from kagent.ids import new_id
from kagent.pubsub import Event, redis_client
from kagent.sql import execute
from runs.models import Run, RunEvent, RunStep, ToolCall
from runs.resources import MODEL_STEP, RUN, TOOL_CALL_STEP, for_browser
from runs.webhook_events import run_data
from tools import builtins

logger = logging.getLogger(__name__)

T = RunEvent.Type
STATUS_OF: dict[str, str] = {
    T.QUEUED: Run.Status.QUEUED,
    T.IN_PROGRESS: Run.Status.IN_PROGRESS,
    T.REQUIRES_ACTION: Run.Status.REQUIRES_ACTION,
    T.COMPLETED: Run.Status.COMPLETED,
    T.FAILED: Run.Status.FAILED,
    T.CANCELLED: Run.Status.CANCELLED,
}
EVENT_OF_STATUS: dict[str, str] = {status: event for event, status in STATUS_OF.items()}
# A run's stream ends after one of these (a conversation's never ends by an event).
CLOSING = frozenset({T.REQUIRES_ACTION, T.COMPLETED, T.FAILED, T.CANCELLED})
BATCH = 200


def channel(run_id: str) -> str:
    return f"kagent:run:{run_id}"


def last_id(run_id: str) -> int:
    """The id of the run's latest event (0: none yet): where a page rendered now starts following it."""
    return RunEvent.objects.filter(run_id=run_id).order_by("-id").values_list("id", flat=True).first() or 0


def followed_from(run: Run) -> int:
    """Where a page showing `run` now starts following its events: the latest event's id, read before the run is
    read again (in place). The other way round, an event written between the two reads (the run paused, say) would
    count as seen while the page shows the run as it was before: the page would wait for an event already sent."""
    if run.status in Run.TERMINAL:
        return 0  # nothing to follow: a run that ended has no event to come (its page doesn't follow it)
    latest = last_id(run.pk)
    run.refresh_from_db()
    return latest


def written_so_far(run_id: str) -> str:
    """The answer shown so far while a run works: its `run.output.delta`s after the last reset, joined (a page that
    shows the run now and follows its events from here on)."""
    shown = ""
    pieces = RunEvent.objects.filter(run_id=run_id, type__in=(T.OUTPUT_DELTA, T.OUTPUT_RESET)).order_by("id")
    for kind, text in pieces.values_list("type", "text"):
        shown = "" if kind == T.OUTPUT_RESET else shown + text
    return shown


def record(run_id: str, event_type: str, *, ref: str = "") -> None:
    """One event, in the caller's transaction, and the run's streams woken after it commits."""
    RunEvent.objects.create(run_id=run_id, type=event_type, ref=ref)
    notify(run_id)


# A status the business can subscribe to (run.completed, …): the run's event and, when the project has an endpoint
# for it, the webhook event, in one statement.
_STATUS_WITH_WEBHOOK_SQL = f"""
WITH event AS (
    INSERT INTO runs_runevent (run_id, type, ref, created_at) VALUES (%(run)s, %(type)s, '', now()) RETURNING run_id
), reported AS (
    SELECT run.id, run.project_id, run.sandbox FROM runs_run AS run JOIN event ON run.id = event.run_id
)
{outbox.insert_sql("reported", id_param="webhook_event", type_param="type", data_param="data")}
"""


def record_status(run_id: str, status: str) -> None:
    """The run's status event, in the caller's transaction, with its webhook event where one is wanted: its data is
    the run as the change wrote it, rendered now (the app's answer takes a pause's required action away, a
    `store: false` run's content goes once returned: the webhook carries the run as it was at the event)."""
    event = EVENT_OF_STATUS.get(status)
    if event is None:
        return
    if event not in outbox.RUN_EVENT_TYPES:
        record(run_id, event)
        return
    data = _data_now(run_id, status)
    params = {
        "run": run_id,
        "type": event,
        "webhook_event": new_id("evt"),
        "data": None if data is None else json.dumps(data, ensure_ascii=False),
    }
    rows = execute(_STATUS_WITH_WEBHOOK_SQL, params)
    notify(run_id)
    if rows:
        outbox.dispatch(rows[0][0])


def _data_now(run_id: str, status: str) -> dict[str, Any] | None:
    """The status event's webhook data, when the project has an endpoint for it (one read: the run without the large
    columns the API doesn't render, and whether anyone is subscribed). Never fails the change: data that can't be
    rendered now (there is no known way) is rendered at dispatch."""
    event = EVENT_OF_STATUS[status]
    endpoints = WebhookEndpoint.objects.filter(project_id=OuterRef("project_id"), enabled=True)
    run = (
        Run.objects.defer("transcript", "tool_set", "config")
        .annotate(subscribed=Exists(endpoints.filter(event_types__contains=[event])))
        .get(pk=run_id)
    )
    if run.sandbox or not run.subscribed:
        return None
    try:
        return run_data(run, status)
    except (TypeError, ValueError):
        logger.exception("run %s: its pause's webhook data could not be rendered now", run_id)
        return None


def insert_sql(source: str, *, type_param: str, ref_param: str | None = None) -> str:
    """An INSERT of one event per row of the CTE `source` (which has the run's `id`), for the engine's statements."""
    ref = f"%({ref_param})s" if ref_param else "''"
    # Built from the engine's own names (the CTE, the parameters' names): every value is a bound parameter.
    return (
        f"INSERT INTO runs_runevent (run_id, type, ref, created_at) "  # noqa: S608
        f"SELECT id, %({type_param})s, {ref}, now() FROM {source}"
    )


def notify(run_id: str) -> None:
    """Wakes the run's open streams after the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: publish(run_id))


# What the engine's statements return of the run's row: whether it is followed now, by the database's clock (the
# one `follow` writes with: the clocks of the web servers and the workers never meet here).
FOLLOWED_SQL = "coalesce(followed_until > now(), false) AS followed"


def notify_if_followed(run_id: str, followed: bool | None) -> None:
    """`notify`, when the statement that wrote the event found the run followed (`FOLLOWED_SQL`)."""
    if followed:
        notify(run_id)


def follow(run_id: str, seconds: float) -> None:
    """The run is followed for the next `seconds` by the database's clock (or longer, if another follower said so):
    its events wake the follower from now on. Called after subscribing and before looking at the run (see the
    module's docstring)."""
    until = ExpressionWrapper(Now() + timedelta(seconds=seconds), output_field=DateTimeField())
    Run.objects.filter(pk=run_id).update(followed_until=Greatest(Coalesce(F("followed_until"), until), until))


def publish(run_id: str) -> None:
    try:
        redis_client().publish(channel(run_id), "1")
    except Exception:  # a stream that misses the wake-up looks again within its keep-alive period
        logger.warning("could not publish an event of run %s", run_id, exc_info=True)


def _browser_step(rendered: dict[str, Any]) -> dict[str, Any]:
    """What a browser (publishable key) is shown of a step: what happened, not the business's data (arguments,
    upstream bodies and what the model was shown stay with the steps API, for the business's server)."""
    shown = {key: rendered[key] for key in ("id", "object", "kind", "round", "created_at", "duration_ms")}
    call = rendered.get("tool_call")
    if isinstance(call, dict):
        shown["tool_call"] = {
            key: call.get(key) for key in ("call_id", "name", "kind", "effect", "status", "simulated", "policy")
        }
        shown["tool_call"]["receipt"] = _receipt(call)
    return shown


# What the customer is owed of an escalation the tools really made: the handoff, the ticket's number (the chat widget
# shows these, never the model's claim of them). The built-ins' results, as they returned them.
_RECEIPTS = builtins.receipts()


def _receipt(call: dict[str, Any]) -> dict[str, Any] | None:
    kept = _RECEIPTS.get(str(call.get("name")))
    result = call.get("shown_to_model")
    if kept is None or call.get("kind") != "builtin" or call.get("status") != "succeeded":
        return None
    what, fields = kept
    made = result.get(what) if isinstance(result, dict) and result.get("ok") is True else None
    if not isinstance(made, dict):
        return None  # simulated in the test panel, or nothing made
    return {what: {field: made.get(field) for field in fields}}


def after(run_id: str, last_id: int, *, full_steps: bool) -> list[Event]:
    """The run's events after `last_id`, oldest first (at most BATCH), with their data."""
    rows = list(RunEvent.objects.filter(run_id=run_id, id__gt=last_id).order_by("id")[:BATCH])
    if not rows:
        return []
    run = Run.objects.get(pk=run_id)
    refs = [row.ref for row in rows if row.ref]
    steps = {step.pk: step for step in RunStep.objects.filter(pk__in=refs)} if refs else {}
    calls = {call.pk: call for call in ToolCall.objects.filter(pk__in=refs)} if refs else {}
    events = []
    for row in rows:
        if row.type == T.OUTPUT_DELTA:
            events.append(Event(row.id, row.type, {"run": run_id, "delta": row.text}, row.type in CLOSING))
        elif row.type == T.OUTPUT_RESET:
            events.append(Event(row.id, row.type, {"run": run_id}, row.type in CLOSING))
        elif row.type == T.STEP_CREATED:
            if row.ref in steps:
                data = MODEL_STEP.render(steps[row.ref])
            elif row.ref in calls:
                data = TOOL_CALL_STEP.render(calls[row.ref])
            else:
                continue  # a step deleted since (its run's project deleted): nothing to show
            events.append(Event(row.id, row.type, data if full_steps else _browser_step(data), row.type in CLOSING))
        else:
            as_then = copy.copy(run)
            as_then.status = STATUS_OF[row.type]
            rendered = RUN.render(as_then)
            events.append(
                Event(row.id, row.type, rendered if full_steps else for_browser(rendered), row.type in CLOSING)
            )
    return events
