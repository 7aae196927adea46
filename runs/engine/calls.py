"""A round's tool calls: each checked, then run (a built-in here, an HTTP or MCP tool sent through the outbound
client) or left waiting, each result recorded before the next; a call that was in flight when a worker died is sent
again with the same id."""

from __future__ import annotations

import json
import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from kagent.models import SigningSecret
from kagent.secrets import secret_resolve, signing_secrets_for_calls
from llm.types import Message, ToolCallRequest
from runs import run_events, store
from runs.engine.decisions import Decisions
from runs.executors import builtin_execute
from runs.lease import KEEPER, lease, release_connection
from runs.limits import bucket_held
from runs.models import RunEvent, ToolCall
from tools.http_call import http_tool_call
from tools.mcp_call import mcp_tool_call
from tools.template_values import EndUserIdentity
from tools.toolset import ToolKind, ToolSpec

logger = logging.getLogger(__name__)

# Calls a round leaves for someone else: the app's output, a person's decision.
# Calls a round leaves for someone else: the app's output, a person's decision.
WAITING_CALLS = (ToolCall.Status.AWAITING_OUTPUT, ToolCall.Status.AWAITING_APPROVAL)
FINAL_CALLS = (ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED, ToolCall.Status.REFUSED, ToolCall.Status.CANCELLED)
FAILURE_BANNER = "[TOOL FAILED] Nothing changed. Fix the cause and retry, or tell the customer plainly that it failed."


class ToolCalls(Decisions):
    def _process_round(self, round_number: int) -> bool:
        """Checks and runs every call of the round. False when the run paused (client tools) or was cancelled."""
        calls = [c for c in self.calls if c.round == round_number]
        requests = dict(enumerate(self.transcript[-1].tool_calls))
        for call in calls:
            if call.status in FINAL_CALLS or call.status in WAITING_CALLS:
                continue
            if call.status == ToolCall.Status.RUNNING:
                spec = next((s for s in self.tool_set if s.name == call.name), None)
                if spec is not None:
                    if call.pk not in self.unsent:
                        # It may have reached the business before a crash: send it again with the same id.
                        if not self._mark_running(call):
                            self._check_and_run(call, requests.get(call.index) or self._request_of(call), round_number)
                            continue
                    self._send(call, spec)
                    continue
            self._check_and_run(call, requests.get(call.index) or self._request_of(call), round_number)

        if self.cancelled:
            self._finish_cancelled()
            return False
        # A person's decisions first: the app's outputs are asked for once every approval is answered.
        approvals = [c for c in calls if c.status == ToolCall.Status.AWAITING_APPROVAL]
        if approvals:
            self._pause_for_approval(approvals)
            return False
        awaiting = [c for c in calls if c.status == ToolCall.Status.AWAITING_OUTPUT]
        if awaiting:
            self._pause(awaiting)
            return False
        for call in calls:
            self.transcript.append(
                Message(
                    role="tool", content=self._shown(call), tool_call_id=call.model_call_id, name=call.requested_name
                )
            )
        # Kept in memory until the next fenced write: after a crash, the round is simply found complete again.
        return True

    @staticmethod
    def _request_of(call: ToolCall) -> ToolCallRequest:
        return ToolCallRequest(call.model_call_id, call.requested_name, json.dumps(call.arguments or {}))

    def _shown(self, call: ToolCall) -> str:
        """What the model reads for a call: the result as JSON, with a banner it can't miss when it failed."""
        result = call.result if call.result is not None else {"ok": False, "error": {"code": "not_run"}}
        text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))  # as shaping measured its 4 KiB
        if not result.get("ok", False):
            return f"{FAILURE_BANNER}\n{text}"
        return text

    def _check_and_run(self, call: ToolCall, request: ToolCallRequest, round_number: int) -> None:
        """A call of the round not decided yet: the policy check now, then what it leads to. The check and the
        write that counts against the per-user limits hold the bucket (runs/limits.py); the call is sent after."""
        if not self.fresh:
            self.heartbeat()  # step 6 of the policy check needs to know about a cancel now
        with bucket_held(self.run.project_id, self.run.rate_key):
            decision = self._decide(call, request, round_number)
            if not self._outcome_without_side_effects(call, decision):
                with transaction.atomic():
                    builtin_execute(
                        run=self.run,
                        call=call,
                        name=decision.name,
                        arguments=decision.arguments,
                        fields=self._decision_fields(call),
                    )
                    run_events.record(self.run.pk, RunEvent.Type.STEP_CREATED, ref=call.pk)
                self.fresh = False
                return
            if call.status != ToolCall.Status.RUNNING:
                self._record(call)
                return
            marked = self._mark_running(call)
        if not marked:
            self._check_and_run(call, request, round_number)  # a cancel arrived: refused as cancelled
            return
        store.crash_point("running")
        self._send(call, self._spec(call))

    def _spec(self, call: ToolCall) -> ToolSpec:
        spec = next(s for s in self.tool_set if s.name == call.name)
        return spec

    @staticmethod
    def _decision_fields(call: ToolCall) -> dict[str, Any]:
        return {
            "name": call.name,
            "kind": call.kind,
            "effect": call.effect,
            "arguments": call.arguments,
            "arguments_hash": call.arguments_hash,
            "policy_decision": call.policy_decision,
            "policy_code": call.policy_code,
            "approval": call.approval,
        }

    def _record(self, call: ToolCall) -> None:
        """A decided call that ran nothing (refused, simulated, waiting for the app), with its event."""
        with transaction.atomic():
            ToolCall.objects.filter(pk=call.pk).update(
                status=call.status,
                result=call.result,
                finished_at=call.finished_at,
                simulated=call.simulated,
                **self._decision_fields(call),
            )
            if call.status not in WAITING_CALLS:  # its event comes with the app's output, or the decision
                run_events.record(self.run.pk, RunEvent.Type.STEP_CREATED, ref=call.pk)

    def _mark_running(self, call: ToolCall) -> bool:
        """Records the call as running (about to be sent), fenced; False when a cancel arrived first."""
        now = timezone.now()
        fence = store.mark_running(call, run_id=self.run.pk, held_by=self.claim, now=now, lease_until=now + lease())
        if not self._fenced(fence):
            call.status = ToolCall.Status.PENDING
            return False
        call.status = ToolCall.Status.RUNNING
        return True

    def _send(self, call: ToolCall, spec: ToolSpec) -> None:
        """Sends a call recorded as running (an HTTP or an MCP tool's), then records its result (the egress log has
        each attempt by then)."""
        self.unsent.discard(call.pk)
        assert spec.definition is not None  # every HTTP and MCP tool spec carries the definition it calls
        signing_secrets = signing_secrets_for_calls(self.run.project_id, SigningSecret.Purpose.TOOL_SIGNING)
        project_id = self.run.project_id
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        end_user = self.run.end_user
        identity = EndUserIdentity(end_user.external_id, end_user.traits) if end_user else None
        with KEEPER.kept(self.run.pk, held_by=self.claim):
            if spec.kind == ToolKind.MCP:
                outcome = mcp_tool_call(
                    project_id=project_id,
                    tool=spec.definition,
                    arguments=arguments,
                    call_id=call.pk,
                    secret_lookup=lambda name: secret_resolve(project_id=project_id, name=name),
                    signing_secrets=signing_secrets,
                    record=store.record_attempt,  # each request of its session as soon as it is over
                    before_send=release_connection,  # the secrets it read are in the headers: no connection held
                    end_user=identity,  # from the credential, inside the signed body
                )
            else:
                outcome = http_tool_call(
                    project_id=project_id,
                    tool=spec.definition,
                    arguments=arguments,
                    call_id=call.pk,
                    end_user=identity,
                    variables=self.run.config.get("variables") or {},
                    secret_lookup=lambda name: secret_resolve(project_id=project_id, name=name),
                    signing_secrets=signing_secrets,
                    record=store.record_attempt,  # each attempt's row as soon as it is over
                    before_send=release_connection,  # the secrets it read are in the request: no connection held
                )
        store.crash_point("sent")
        call.status = ToolCall.Status.SUCCEEDED if outcome.ok else ToolCall.Status.FAILED
        call.result, call.upstream = outcome.model_result, outcome.step
        store.record_result(call, now=timezone.now())
        store.crash_point("result")
        self.fresh = False
