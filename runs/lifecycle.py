"""What happens to a run after it is created: superseded by a new message, cancelled, answered with the app's
tool outputs, expired while it waited, its content purged (`store: false`), and the sweep that recovers what a
crash or a lost queue message left behind."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from conversations.models import Message as ChatMessage
from conversations.models import Session, SessionEvent
from kagent.errors import Conflict, Unprocessable
from runs import run_events, transitions
from runs.approvals import APPROVE_TOOL_CALLS, approvals_closed, expire_approvals_if_due
from runs.engine import client_output_shown
from runs.models import Run, RunEvent, RunStep, ToolCall
from runs.queue import enqueue_run, runs_waiting

logger = logging.getLogger(__name__)

CLIENT_OUTPUT_MAX_BYTES = 16 * 1024
# A queued run nobody claimed for this long lost its queue message (e.g. a broker restart): send it again.
UNREAD_PURGE_AFTER = timedelta(minutes=10)


def supersede_open_runs(session: Session) -> None:
    """A new run on a session supersedes the one still open there."""
    for open_run in Run.objects.filter(session=session, status__in=Run.ACTIVE):
        try:
            run_cancel(run=open_run, reason="superseded")
        except Conflict:
            pass  # it finished on its own a moment ago: nothing left to supersede


def _close_open_calls(run_id: str, now: Any) -> None:
    """The calls a paused or queued run still had open, cancelled with the run, each with its step event (before
    the run's own last event: a stream ends there)."""
    open_calls = ToolCall.objects.filter(
        run_id=run_id,
        status__in=[ToolCall.Status.PENDING, ToolCall.Status.AWAITING_OUTPUT, ToolCall.Status.AWAITING_APPROVAL],
    )
    closed = list(open_calls.order_by("created_at", "pk"))
    open_calls.update(status=ToolCall.Status.CANCELLED, finished_at=now)
    for call in closed:
        run_events.record(run_id, RunEvent.Type.STEP_CREATED, ref=call.pk)
    waited = [call for call in closed if call.status == ToolCall.Status.AWAITING_APPROVAL]
    if waited:
        for call in waited:
            call.status = ToolCall.Status.CANCELLED
        approvals_closed(Run.objects.get(pk=run_id), waited)


def run_cancel(*, run: Run, reason: str = "requested") -> Run:
    """A queued or paused run is cancelled at once; a running one stops at its next step."""
    now = timezone.now()
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status in transitions.CANCEL.sources:
            transitions.transition(
                run.pk,
                transitions.CANCEL,
                cancellation_reason=reason,
                cancel_requested=True,
                completed_at=now,
                required_action=None,
                expires_at=None,
                record_event=False,
            )
            _close_open_calls(run.pk, now)
            run_events.record_status(run.pk, Run.Status.CANCELLED)
        elif locked.status == Run.Status.IN_PROGRESS:
            # Its worker stops at its next step (every fenced write notices) and ends it as cancelled.
            Run.objects.filter(pk=run.pk).update(cancel_requested=True, cancellation_reason=reason)
        else:
            raise Conflict(
                "run_not_active", f"This run is already {locked.status}; only an active run can be cancelled."
            )
    run.refresh_from_db()
    return run


@dataclass(frozen=True)
class ToolOutput:
    """The app's answer to one client tool call."""

    call_id: str
    output: Any
    is_error: bool = False


def run_submit_tool_outputs(*, run: Run, tool_outputs: list[ToolOutput]) -> Run:
    """Resumes a paused run: every open call answered in one request, each output at most 16 KiB of JSON."""
    run_expire_if_due(run=run)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status != Run.Status.REQUIRES_ACTION:
            raise Conflict("run_not_awaiting_outputs", f"This run is {locked.status}, not waiting for tool outputs.")
        if (locked.required_action or {}).get("type") == APPROVE_TOOL_CALLS:
            raise Conflict(
                "run_not_awaiting_outputs",
                "This run waits for a person to approve tool calls (approve_tool_calls), not for tool outputs.",
            )
        open_calls = {
            call.pk: call for call in ToolCall.objects.filter(run=locked, status=ToolCall.Status.AWAITING_OUTPUT)
        }
        seen: set[str] = set()
        updates: list[tuple[ToolCall, dict[str, Any], bool]] = []
        for index, item in enumerate(tool_outputs):
            path = f"$.tool_outputs[{index}]"
            if item.call_id in seen:
                raise Unprocessable("duplicate_call_id", f"{path}: {item.call_id[:60]} is answered twice.")
            seen.add(item.call_id)
            if item.call_id not in open_calls:
                raise Unprocessable(
                    "unknown_call_id", f"{path}: {item.call_id[:60]} is not an open tool call of this run."
                )
            size = len(json.dumps(item.output, ensure_ascii=False).encode())
            if size > CLIENT_OUTPUT_MAX_BYTES:
                raise Unprocessable(
                    "tool_output_too_large",
                    f"{path}.output is {size} bytes of JSON; at most {CLIENT_OUTPUT_MAX_BYTES}.",
                )
            call = open_calls[item.call_id]
            updates.append((call, client_output_shown(call.name, item.output, item.is_error), item.is_error))
        missing = sorted(set(open_calls) - seen)
        if missing:
            raise Unprocessable(
                "tool_outputs_incomplete",
                f"Every open call must be answered in one request; missing: {', '.join(missing)}.",
                details={"missing_call_ids": missing},
            )
        now = timezone.now()
        for call, shown, is_error in updates:
            ToolCall.objects.filter(pk=call.pk).update(
                status=ToolCall.Status.FAILED if is_error else ToolCall.Status.SUCCEEDED, result=shown, finished_at=now
            )
            run_events.record(locked.pk, RunEvent.Type.STEP_CREATED, ref=call.pk)
        transitions.transition(
            locked.pk,
            transitions.RESUME,
            required_action=None,
            expires_at=None,
            queued_at=now,
            resumes=F("resumes") + 1,
        )
        enqueue_run(locked.pk)
    run.refresh_from_db()
    return run


def run_expire_if_due(*, run: Run) -> bool:
    """A paused run whose outputs didn't come within 10 minutes fails with tool_outputs_expired. One that waited for
    approval past its time goes on without the calls nobody approved (runs/approvals.py)."""
    if expire_approvals_if_due(run=run):
        return True
    now = timezone.now()
    with transaction.atomic():
        expired = transitions.transition(
            run.pk,
            transitions.EXPIRE,
            where={"expires_at__lte": now, "required_action__type": "submit_tool_outputs"},
            last_error={"code": "tool_outputs_expired", "message": "No tool outputs arrived within 10 minutes."},
            completed_at=now,
            required_action=None,
            record_event=False,
        )
        if expired:
            _close_open_calls(run.pk, now)
            run_events.record_status(run.pk, transitions.EXPIRE.target)
    if expired:
        run.refresh_from_db()
    return bool(expired)


def run_purge(*, run: Run) -> None:
    """`store: false`: once the result was returned, the content goes; metadata stays."""
    now = timezone.now()
    with transaction.atomic():
        if not Run.objects.filter(pk=run.pk, status__in=Run.TERMINAL, purged_at__isnull=True).update(
            input="",
            output=None,
            transcript=[],
            tool_set=[],
            required_action=None,
            purged_at=now,
            result_delivered=True,
        ):
            return
        purged = list(ChatMessage.objects.filter(run_id=run.pk).values_list("pk", flat=True))
        if purged and run.session_id is not None:
            # Their events go too: a conversation's stream never has to step over a run of events it can't send.
            SessionEvent.objects.filter(session_id=run.session_id, ref__in=purged).delete()
        ChatMessage.objects.filter(run_id=run.pk).delete()
        RunEvent.objects.filter(run_id=run.pk, type=RunEvent.Type.OUTPUT_DELTA).update(text="")  # the answer's pieces
        ToolCall.objects.filter(run_id=run.pk).update(arguments=None, arguments_hash="", result=None, upstream=None)
        RunStep.objects.filter(run_id=run.pk).update(data={})


def _resend_lost_messages(now: datetime) -> int:
    """Sends again the message of each run still queued whose message is lost: once it has waited
    KAGENT_RUN_RESEND_SECONDS in any case (a long backlog, a broker whose queue can't be read), and after
    KAGENT_RUN_RESEND_MISSING_SECONDS when its message is no longer waiting on the broker's queue (taken by a worker
    that was killed before it claimed the run, or gone with a broker that restarted empty). A second message is
    harmless: the claim lets one worker through."""
    resend_before = now - timedelta(seconds=settings.KAGENT_RUN_RESEND_SECONDS)
    missing_s = min(settings.KAGENT_RUN_RESEND_MISSING_SECONDS, settings.KAGENT_RUN_RESEND_SECONDS)
    missing_before = now - timedelta(seconds=missing_s)
    stale = list(
        Run.objects.filter(status=Run.Status.QUEUED, queued_at__lt=missing_before)
        .order_by("queued_at")
        .values_list("pk", "queued_at")[:500]
    )
    waiting = None
    if any(queued_at >= resend_before for _, queued_at in stale):  # read the queue only when it decides something
        waiting = runs_waiting()
    resent = 0
    for run_id, queued_at in stale:
        lost = queued_at < resend_before or (waiting is not None and run_id not in waiting)
        if lost and Run.objects.filter(pk=run_id, status=Run.Status.QUEUED, queued_at=queued_at).update(queued_at=now):
            enqueue_run(run_id)
            resent += 1
    return resent


def run_sweep() -> dict[str, int]:
    """The periodic safety net: re-queue runs whose worker died, resend lost queue messages, expire paused runs,
    purge unread `store: false` runs."""
    now = timezone.now()
    counts = {"requeued": 0, "resent": 0, "expired": 0, "purged": 0}
    for run_id, claims in Run.objects.filter(status=Run.Status.IN_PROGRESS, lease_expires_at__lt=now).values_list(
        "pk", "claims"
    )[:500]:
        if transitions.transition(
            run_id,
            transitions.REQUEUE,
            held_by=claims,
            where={"lease_expires_at__lt": now},
            queued_at=now,
            lease_expires_at=None,
        ):
            logger.warning("run %s: lease expired (worker lost); re-queued", run_id)
            enqueue_run(run_id)
            counts["requeued"] += 1
    counts["resent"] = _resend_lost_messages(now)
    for run in Run.objects.filter(status=Run.Status.REQUIRES_ACTION, expires_at__lte=now)[:500]:
        counts["expired"] += run_expire_if_due(run=run)
    for run in Run.objects.filter(
        store=False, status__in=Run.TERMINAL, purged_at__isnull=True, completed_at__lt=now - UNREAD_PURGE_AFTER
    )[:500]:
        run_purge(run=run)
        counts["purged"] += 1
    return counts
