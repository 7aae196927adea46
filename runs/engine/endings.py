"""How a run ends or waits: completed with an answer the truthfulness guard let through (or pushed back to the
model), paused for the app's outputs or a person's decision, cancelled or failed."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

import guard
from agents.config import APPROVAL_EXPIRES_DEFAULT
from llm.types import Message
from runs import run_events, store, transitions
from runs.answer_facts import claims_output
from runs.approvals import APPROVE_TOOL_CALLS, approval_event
from runs.engine.state import NOT_CANCELLED, EngineState, RunStopped
from runs.models import RunEvent, RunStep, ToolCall

logger = logging.getLogger(__name__)

TOOL_OUTPUTS_TTL = timedelta(minutes=10)
OPEN_CALLS = (
    ToolCall.Status.PENDING,
    ToolCall.Status.AWAITING_OUTPUT,
    ToolCall.Status.AWAITING_APPROVAL,
    ToolCall.Status.RUNNING,
)
FALLBACK_ANSWER = "I'm sorry, I can't answer that right now."


class Endings(EngineState):
    def _finish_with_answer(self, text: str, step: RunStep) -> bool:
        """True when the run completed; False when the answer was pushed back to the model."""
        text = text.strip() or FALLBACK_ANSWER
        claims = guard.check(text, self._facts())
        if claims and self.run.pushbacks < guard.MAX_PUSHBACKS:
            self.live.reset()  # pushed back: what was shown of it goes (its claims never were)
            self.run.pushbacks += 1
            self.transcript.append(Message(role="assistant", content=text))
            self.transcript.append(Message(role="notice", content=guard.pushback_notice(claims, self.run.pushbacks)))
            notice = RunStep(
                run=self.run,
                kind=RunStep.Kind.NOTICE,
                round=self.run.rounds,
                data={"pushback": self.run.pushbacks, "claims": [claim.to_dict() for claim in claims]},
            )
            with transaction.atomic():
                self.fence(transcript=self._transcript_json(), pushbacks=self.run.pushbacks, usage=self.run.usage)
                RunStep.objects.bulk_create([step, notice])
                for written in (step, notice):
                    run_events.record(self.run.pk, RunEvent.Type.STEP_CREATED, ref=written.pk)
            return False
        answer = Message(role="assistant", content=text)
        fence = store.complete(
            self.run,
            held_by=self.claim,
            text=text,
            output=claims_output(text, claims),
            transcript=self._transcript_json() + [answer.to_dict()],
            step=step,
            now=timezone.now(),
            # The rest of the answer shown as it was written; with claims remaining, a reset: the client shows a
            # neutral reply, never the claim.
            delta="" if claims else self.live.rest(text),
            reset=bool(claims),
        )
        if not self._fenced(fence):
            self._finish_cancelled()
            return True
        store.crash_point("completed")
        return True

    def _stopped_before_finishing(self) -> None:
        """The final write missed: a cancel arrived (finish as cancelled) or the run is no longer ours."""
        if not transitions.is_held(self.run.pk, held_by=self.claim):
            raise RunStopped
        self._finish_cancelled()

    def _pause_for_approval(self, waiting: list[ToolCall]) -> None:
        """Waits for a person's decision on each call (approve_tool_calls), for the agent's approval_expires_minutes;
        `approval.requested` for each, in the same transaction."""
        minutes = int(self.tools_config.get("approval_expires_minutes") or APPROVAL_EXPIRES_DEFAULT)
        expires = timezone.now() + timedelta(minutes=minutes)
        with transaction.atomic():
            if self._pause_for(APPROVE_TOOL_CALLS, waiting, expires) and not self.run.sandbox:
                for call in waiting:
                    approval_event(self.run, call, "approval.requested", expires_at=int(expires.timestamp()))

    def _pause(self, awaiting: list[ToolCall]) -> None:
        self._pause_for("submit_tool_outputs", awaiting, timezone.now() + TOOL_OUTPUTS_TTL)

    def _pause_for(self, kind: str, calls: list[ToolCall], expires: datetime) -> bool:
        """`requires_action` of `kind` for `calls` until `expires`, written while this worker holds the run; False
        when it no longer does (ended as cancelled, or someone else's now)."""
        required = {
            "type": kind,
            "expires_at": int(expires.timestamp()),
            "tool_calls": [{"call_id": c.pk, "name": c.name, "arguments": c.arguments or {}} for c in calls],
        }
        if transitions.transition(
            self.run.pk,
            transitions.PAUSE,
            held_by=self.claim,
            where=NOT_CANCELLED,
            required_action=required,
            expires_at=expires,
            lease_expires_at=None,
            transcript=self._transcript_json(),
            usage=self.run.usage,
        ):
            return True
        self._stopped_before_finishing()
        return False

    def _finish_cancelled(self) -> None:
        self._end(transitions.STOP)

    def _fail(self, code: str, message: str) -> None:
        self._end(transitions.FAIL, last_error={"code": code, "message": message}, usage=self.run.usage)

    def _end(self, move: transitions.Move, **fields: Any) -> None:
        """A terminal state, written only while this worker owns the run; then its open calls are closed."""
        now = timezone.now()
        with transaction.atomic():
            if not transitions.transition(
                self.run.pk, move, held_by=self.claim, completed_at=now, lease_expires_at=None, **fields
            ):
                return  # someone else has the run now, or it already ended: leave its calls alone
            ToolCall.objects.filter(run=self.run, status__in=OPEN_CALLS).update(
                status=ToolCall.Status.CANCELLED, finished_at=now
            )
