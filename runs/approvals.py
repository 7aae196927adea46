"""A person's approval before an action runs (SPEC §5 "Approvals", issue 29).

A grant of an action (a built-in action, an HTTP or an MCP tool) may say `approval: ask`. When every step of the
policy check passes for such a call, the engine records it `awaiting_approval` and sends nothing; once the round's
other calls are done, the run pauses with `required_action.type` `approve_tool_calls` for the agent's
`approval_expires_minutes` (30). `run_approve_tool_calls` answers every waiting call in one request, from the secret
key or the dashboard (`decided_by` says who): an approved call goes back to `pending` and runs when the run resumes,
after the policy check once more (the agent may have been paused meanwhile), exactly once; a denied one is `refused`
and the model reads `approval_denied`; one nobody decided in time reads `approval_expired`, and the run goes on.
`scope: session` approves the tool for the rest of the conversation (Kram's "always").

Webhooks: `approval.requested` when a call starts waiting, `approval.decided` when it is decided or expires, each
with the approval as the `Approval` resource renders it. Test-panel (sandbox) runs send none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from hooks import outbox
from kagent.errors import Conflict, Unprocessable
from runs import run_events, transitions
from runs.models import Run, RunEvent, ToolCall
from runs.queue import enqueue_run
from runs.resources import APPROVAL, Approval

APPROVE_TOOL_CALLS: Final = "approve_tool_calls"
DECISIONS: Final = ("approve", "deny")
SCOPES: Final = ("once", "session")
NOTE_MAX: Final = 1000

GUIDANCE: Final = {
    "approval_denied": "A person of the team decided that this action must not run, so nothing was done. Tell the "
    "customer plainly that it was not done; don't promise it or say it is in progress.",
    "approval_expired": "Nobody of the team approved this action in time, so it did not run and nothing was done. "
    "Tell the customer plainly that it was not done; offer a handover to the team if they still want it.",
}


@dataclass(frozen=True)
class ApprovalDecision:
    call_id: str
    decision: str  # approve | deny
    scope: str = "once"  # once | session
    note: str = ""


@dataclass(frozen=True)
class DecidedBy:
    """Who decided: the project's secret key (`api_key`, its id) or a member on the dashboard (`member`)."""

    type: str
    id: str
    name: str = ""

    def as_json(self) -> dict[str, str]:
        return {"type": self.type, "id": self.id, "name": self.name}


def refusal(code: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "guidance": GUIDANCE[code]}}


def session_approvals(session_id: str) -> dict[str, dict[str, Any]]:
    """The tools a person approved for the rest of this conversation (`scope: session`): each tool's name with that
    approval as a later call of it records it (`given_on`: the call it was given on; the latest if several)."""
    given = ToolCall.objects.filter(
        run__session_id=session_id, approval__decision="approve", approval__scope="session"
    ).exclude(approval__has_key="given_on")
    rows = given.order_by("created_at").values_list("name", "pk", "approval")
    return {name: {**approval, "given_on": pk} for name, pk, approval in rows if isinstance(approval, dict)}


def approval_data(run: Run, call: ToolCall, *, expires_at: int | None = None) -> dict[str, Any]:
    """The approval as webhooks and the dashboard show it (runs/resources.py `APPROVAL`)."""
    if expires_at is None and isinstance(run.required_action, dict):
        expires_at = run.required_action.get("expires_at")
    return APPROVAL.render(Approval(run, call, expires_at))


def approval_event(run: Run, call: ToolCall, event_type: str, *, expires_at: int | None = None) -> None:
    """`approval.requested` or `approval.decided`, in the caller's transaction (the caller leaves sandbox runs out)."""
    data = approval_data(run, call, expires_at=expires_at)
    outbox.record(project_id=run.project_id, event_type=event_type, object_id=call.pk, data=lambda: data)


def _not_waiting(run: Run) -> Conflict:
    return Conflict(
        "run_not_awaiting_approval", f"This run is {run.status}, not waiting for a person to approve tool calls."
    )


def _checked(open_calls: dict[str, ToolCall], decisions: list[ApprovalDecision]) -> None:
    seen: set[str] = set()
    for index, item in enumerate(decisions):
        path = f"$.decisions[{index}]"
        if item.call_id in seen:
            raise Unprocessable("duplicate_call_id", f"{path}: {item.call_id[:60]} is decided twice.")
        seen.add(item.call_id)
        if item.call_id not in open_calls:
            raise Unprocessable(
                "unknown_call_id", f"{path}: {item.call_id[:60]} is not a call of this run waiting for approval."
            )
    missing = sorted(set(open_calls) - seen)
    if missing:
        raise Unprocessable(
            "decisions_incomplete",
            f"Every waiting call must be decided in one request; missing: {', '.join(missing)}.",
            details={"missing_call_ids": missing},
        )


def run_approve_tool_calls(*, run: Run, decisions: list[ApprovalDecision], decided_by: DecidedBy) -> Run:
    """A person's decision on every call the run waits for; the run resumes (queued) at once."""
    expire_approvals_if_due(run=run)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        waiting_for = (locked.required_action or {}).get("type")
        if locked.status != Run.Status.REQUIRES_ACTION or waiting_for != APPROVE_TOOL_CALLS:
            raise _not_waiting(locked)
        open_calls = {
            call.pk: call for call in ToolCall.objects.filter(run=locked, status=ToolCall.Status.AWAITING_APPROVAL)
        }
        _checked(open_calls, decisions)
        now = timezone.now()
        for item in decisions:
            call = open_calls[item.call_id]
            call.approval = {
                "decision": item.decision,
                "scope": item.scope,
                "note": item.note,
                "decided_by": decided_by.as_json(),
                "decided_at": int(now.timestamp()),
            }
            if item.decision == "approve":
                call.status = ToolCall.Status.PENDING  # runs when the run resumes, checked by the policy again
                ToolCall.objects.filter(pk=call.pk).update(status=call.status, approval=call.approval)
            else:
                call.status, call.result, call.finished_at = ToolCall.Status.REFUSED, refusal("approval_denied"), now
                ToolCall.objects.filter(pk=call.pk).update(
                    status=call.status, result=call.result, finished_at=now, approval=call.approval
                )
                run_events.record(locked.pk, RunEvent.Type.STEP_CREATED, ref=call.pk)
            if not locked.sandbox:
                approval_event(locked, call, "approval.decided")
        _resume(locked, now)
    run.refresh_from_db()
    return run


def _resume(run: Run, now: Any) -> None:
    transitions.transition(
        run.pk, transitions.RESUME, required_action=None, expires_at=None, queued_at=now, resumes=F("resumes") + 1
    )
    enqueue_run(run.pk)


def expire_approvals_if_due(*, run: Run) -> bool:
    """A run that waited for approval past `expires_at`: each waiting call is refused as `approval_expired` (nothing
    was sent) and the run goes on, so the model can tell the customer."""
    now = timezone.now()
    with transaction.atomic():
        locked = (
            Run.objects.select_for_update()
            .filter(
                pk=run.pk,
                status=Run.Status.REQUIRES_ACTION,
                expires_at__lte=now,
                required_action__type=APPROVE_TOOL_CALLS,
            )
            .first()
        )
        if locked is None:
            return False
        expired = {
            "decision": "expired",
            "scope": "once",
            "note": "",
            "decided_by": None,
            "decided_at": int(now.timestamp()),
        }
        for call in ToolCall.objects.filter(run=locked, status=ToolCall.Status.AWAITING_APPROVAL):
            call.status, call.result, call.approval = ToolCall.Status.REFUSED, refusal("approval_expired"), expired
            ToolCall.objects.filter(pk=call.pk).update(
                status=call.status, result=call.result, finished_at=now, approval=expired
            )
            run_events.record(locked.pk, RunEvent.Type.STEP_CREATED, ref=call.pk)
            if not locked.sandbox:
                approval_event(locked, call, "approval.decided")
        _resume(locked, now)
    run.refresh_from_db()
    return True


def approvals_closed(run: Run, calls: list[ToolCall]) -> None:
    """`approval.decided` (status `cancelled`) for calls that waited for approval when their run ended without a
    decision (superseded, cancelled): whoever was told it waits hears that it no longer does."""
    if run.sandbox:
        return
    for call in calls:
        approval_event(run, call, "approval.decided")
