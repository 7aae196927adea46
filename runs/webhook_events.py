"""What the business's webhook endpoints receive of runs and of their conversations (issue #11), recorded through
the outbox of `hooks`: the objects exactly as the API renders them. The desk's events: desk/webhook_events.py.

A run's event is recorded by the engine's own statements (`runs/store.py`, `runs/run_events.py`) with the run as it
was at the event (`run_data`, rendered before the statement); one recorded without it is rendered when dispatched
(`run_event_data`). The conversation's events: conversations/session_events.py. Test-panel
(sandbox) runs are never recorded. A `store: false` run sends ids and statuses only: its input, output, required
action and metadata are left empty, whatever is still stored.
"""

from __future__ import annotations

import copy
from typing import Any

from conversations.models import Session
from conversations.resources import SESSION
from hooks import outbox
from hooks.models import WebhookEvent
from runs.models import Run
from runs.resources import RUN

# Each run event names the status it reports: `run.completed` is the run as `completed`.
STATUS_OF_EVENT = {name: Run.Status(name.removeprefix("run.")) for name in sorted(outbox.RUN_EVENT_TYPES)}


def run_data(run: Run, status: str) -> dict[str, Any]:
    """The run as the API renders it, with `status`; without its content for a `store: false` run."""
    as_then = copy.copy(run)
    as_then.status = status
    if not run.store:
        as_then.input, as_then.output, as_then.required_action, as_then.metadata = "", None, None, {}
    data = RUN.render(as_then)
    if not run.store:
        data["input"] = None
    return data


def run_event_data(event: WebhookEvent) -> dict[str, Any] | None:
    run = Run.objects.filter(pk=event.object_id, project_id=event.project_id).first()
    if run is None or run.sandbox:
        return None
    return run_data(run, STATUS_OF_EVENT[event.type])


def register() -> None:
    for event_type in STATUS_OF_EVENT:
        outbox.register_renderer(event_type, run_event_data)


# --- the conversation: rendered when recorded, in the transaction of the change -------------------------------


def flagged_event(*, project_id: str, session_id: str) -> None:
    """`conversation.flagged`: the session as the API renders it (the caller leaves test-panel sessions out)."""
    outbox.record(
        project_id=project_id,
        event_type="conversation.flagged",
        object_id=session_id,
        data=lambda: SESSION.render(Session.objects.select_related("end_user").get(pk=session_id)),
    )
