"""A model call and the round it starts: the answer streamed to whoever follows the run, calls written as text
recovered (never a quoted one), and the round's calls recorded with the transcript in one fenced write."""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from llm import providers
from llm.types import Message, ModelRequest, ModelResponse, ToolCallRequest, ToolDefinition
from llm.written_calls import is_quoted, quoted_in, recover_written_calls
from runs import run_events, store
from runs.engine.calls import ToolCalls
from runs.lease import KEEPER, lease
from runs.limits import bucket_held
from runs.models import RunEvent, RunStep, ToolCall
from tools.policy import parse_arguments

logger = logging.getLogger(__name__)


def default_model() -> dict[str, Any]:
    """An agent that names no model: the operator's endpoint when there is one, else the offline demo model."""
    return {"provider": "openai_compatible"} if settings.KAGENT_LLM_BASE_URL else {"provider": "demo"}


def _clean(text: str) -> str:
    # PostgreSQL can't store NUL, and UTF-8 can't hold a lone surrogate: a hostile model output must not fail the run.
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def _storable(response: ModelResponse) -> ModelResponse:
    calls = tuple(ToolCallRequest(_clean(c.id), _clean(c.name), _clean(c.arguments)) for c in response.tool_calls)
    return dataclasses.replace(response, text=_clean(response.text), tool_calls=calls)


class Rounds(ToolCalls):
    def _call_model(self, tool_choice: str) -> tuple[ModelResponse, RunStep]:
        """The model's answer, and its step, written together with what the answer leads to."""
        tools = tuple(ToolDefinition(s.name, s.description, s.parameters) for s in self.tool_set)
        request = ModelRequest(
            system=self.system_prompt(),
            messages=tuple(self.transcript),
            tools=tools,
            tool_choice="auto" if tool_choice == "auto" else "none",
            model=self.run.config.get("model") or default_model(),
            project_id=self.run.project_id,
            run_id=self.run.pk,
            sink=self.live,
        )
        started = time.monotonic()
        try:
            with KEEPER.kept(self.run.pk, held_by=self.claim):
                response = providers.complete(request)
        finally:
            duration = int((time.monotonic() - started) * 1000)
        response = _storable(response)
        # Tool calls written as text (SPEC §5): recovered and never shown. Native calls win: blocks written next to
        # them are removed from the text, not run a second time.
        written = recover_written_calls(
            response.text, run_id=self.run.pk, round_number=self.run.rounds + 1, tools=self.tool_set
        )
        recovered, quoted = self._written_calls_to_run(request.model, written.calls)
        from_text = bool(recovered) and not response.tool_calls
        response = dataclasses.replace(response, text=written.text, tool_calls=response.tool_calls or recovered)
        usage = self.run.usage or {}
        usage = {
            "input_tokens": usage.get("input_tokens", 0) + response.usage.input_tokens,
            "output_tokens": usage.get("output_tokens", 0) + response.usage.output_tokens,
        }
        self.run.usage = usage
        self.fresh = False
        step = RunStep(
            run=self.run,
            kind=RunStep.Kind.MODEL_CALL,
            round=self.run.rounds,
            duration_ms=duration,
            data={
                "model": response.model_name,
                "tool_choice": tool_choice,
                "tools_offered": [t.name for t in tools],
                "text": response.text,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls],
                "usage": {"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens},
                **({"tool_calls_written_as_text": True} if from_text else {}),
                **({"written_blocks_not_run": written.blocks} if written.found and not recovered else {}),
            },
        )
        if quoted:
            self._record_quoted(quoted, after=step)
        return response, step

    def _written_calls_to_run(
        self, model: dict[str, Any], written: tuple[ToolCallRequest, ...]
    ) -> tuple[tuple[ToolCallRequest, ...], list[ToolCallRequest]]:
        """The written calls to run, and the ones refused as quotations. Only a model declared to write its calls
        as text (`model.text_tool_calls`) has them run, never the demo (it echoes others' words); and never a block
        whose name and arguments are in an input of the run — the customer's or the team's words, a tool result, a
        passage, a client tool's output: a call the model only repeats is someone else's."""
        if not written or not model.get("text_tool_calls") or model.get("provider") in providers.ECHOING:
            return (), []
        seen = quoted_in([m.content for m in self.transcript if m.role != "assistant"], tools=self.tool_set)
        quoted = [call for call in written if is_quoted(call, seen)]
        return tuple(call for call in written if call not in quoted), quoted

    def _record_quoted(self, quoted: list[ToolCallRequest], *, after: RunStep) -> None:
        """A `quoted_tool_call` step for each block refused as a quotation (written fenced, with its event)."""
        steps = [
            RunStep(
                run=self.run,
                kind=RunStep.Kind.QUOTED_TOOL_CALL,
                round=self.run.rounds,  # as the model step it came in
                created_at=after.created_at + timedelta(microseconds=index + 1),
                data={
                    "name": call.name,
                    "arguments": call.arguments[:2000],
                    "reason": "the block is in an input of the run (someone else's words): not run",
                },
            )
            for index, call in enumerate(quoted)
        ]
        with transaction.atomic():
            self.fence()
            RunStep.objects.bulk_create(steps)
            for written in steps:
                run_events.record(self.run.pk, RunEvent.Type.STEP_CREATED, ref=written.pk)

    def _start_round(self, response: ModelResponse, step: RunStep) -> None:
        """Records the model's step and the tool calls it asked for, with the transcript, in one write fenced on
        ownership (a stale worker writes nothing). The first call is decided before that write: nothing has run in
        this round yet, so the facts it is checked against are the round's own; an HTTP call it allows is recorded
        as running in the same write, and sent next."""
        round_number = self.run.rounds + 1
        names = [s.name for s in self.tool_set]
        now = timezone.now()
        calls = [
            ToolCall(
                project_id=self.run.project_id,
                run_id=self.run.pk,
                round=round_number,
                index=index,
                model_call_id=request.id[:200],
                requested_name=request.name[:200],
                name=request.name[:64] if request.name in names else "",
                arguments=arguments if isinstance(arguments, (dict, list)) else None,
                rate_key=self.run.rate_key,
                created_at=now,
            )
            for index, request in enumerate(response.tool_calls)
            for arguments in [parse_arguments(request.arguments)[0]]
        ]
        undecided = list(calls)
        self.transcript.append(Message(role="assistant", content=response.text, tool_calls=tuple(response.tool_calls)))
        transcript, lease_until = self._transcript_json(), timezone.now() + lease()
        write: dict[str, Any] = {
            "rounds": round_number,
            "transcript": transcript,
            "lease_until": lease_until,
            "step": step,
        }
        # The first call's check and the write that counts it hold the per-user limits' bucket (runs/limits.py).
        with bucket_held(self.run.project_id, self.run.rate_key):
            decided = self._decide_first(calls, response.tool_calls[0], round_number) if calls else False
            fence = store.record_round(self.run, held_by=self.claim, calls=calls, **write)
            if not self._fenced(fence):
                # A cancel arrived: the round is still recorded (what the model said is part of the run), undecided.
                calls, decided = undecided, False
                fence = store.record_round(self.run, held_by=self.claim, calls=calls, despite_cancel=True, **write)
                self._fenced(fence)
        store.crash_point("round")
        if decided and calls[0].status == ToolCall.Status.RUNNING:
            self.unsent.add(calls[0].pk)
        self.run.rounds = round_number
        self.calls += calls
