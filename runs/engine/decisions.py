"""A tool call's decision: the policy check over the run's facts, and what an allowed call leads to when nothing
needs to run (refused, waiting for a person or the app, simulated in the test panel, about to be sent)."""

from __future__ import annotations

import copy
import logging
from datetime import timedelta
from typing import Any

from django.utils import timezone

from agents.models import Agent
from agents.selectors import searchable_sources
from llm.types import ToolCallRequest
from runs.approvals import session_approvals
from runs.engine.endings import Endings
from runs.limits import SHARED_BUCKET_PREFIXES
from runs.models import ToolCall
from tools import builtins
from tools.policy import CALLS_OUT, Decision, PolicyContext, policy_check
from tools.shaping import DATA_NOTICE

logger = logging.getLogger(__name__)

SIMULATED = {"ok": True, "simulated": True}


class Decisions(Endings):
    def _policy_context(self, call: ToolCall, round_number: int) -> PolicyContext:
        run = self.run
        now = timezone.now()
        return PolicyContext(
            tools_enabled=bool(self.tools_config.get("enabled", True)),
            tool_set=self.tool_set,
            verified=run.end_user_id is not None,
            has_session=run.session_id is not None,
            actions_paused=self._live_actions_paused,
            business_hours=run.config.get("business_hours"),
            now=now,
            round=round_number,
            max_rounds=self.max_rounds,
            index_in_round=call.index,
            cancelled=self.cancelled,
            succeeded=frozenset(
                (c.name, c.arguments_hash) for c in self.calls if c.status == ToolCall.Status.SUCCEEDED
            ),
            open_ticket_number=self._open_ticket_number,
            has_searchable_knowledge=lambda: searchable_sources(
                project_id=run.project_id, agent_id=run.agent_id
            ).exists(),
            http_calls_last_hour=lambda: self._http_calls_last_hour(call, now),
            tickets_last_day=lambda: builtins.desk().tickets_since(
                project_id=run.project_id, rate_key=run.rate_key, is_test=run.sandbox, since=now - timedelta(days=1)
            ),
        )

    def _http_calls_last_hour(self, call: ToolCall, now: Any) -> int:
        """Step 7's count (HTTP and MCP calls together): this run's own when the run is its own bucket, else the
        bucket's across runs."""
        if self.run.rate_key.startswith("run:"):
            return sum(
                1 for c in self.calls if c.kind in CALLS_OUT and c.policy_decision == "allowed" and c.pk != call.pk
            )
        return (
            ToolCall.objects.filter(
                project_id=self.run.project_id,
                rate_key=self.run.rate_key,
                kind__in=sorted(CALLS_OUT),
                policy_decision="allowed",
                created_at__gte=now - timedelta(hours=1),
            )
            .exclude(pk=call.pk)
            .count()
        )

    def _live_actions_paused(self) -> bool:
        # actions_paused takes effect at once, without publishing: read the agent's switch as it is now.
        if self._live_agent is None:
            self._live_agent = Agent.objects.only("actions_paused").get(pk=self.run.agent_id)
        return self._live_agent.actions_paused

    def _open_ticket_number(self) -> str | None:
        # A shared bucket is not one customer: the open tickets of whoever shares its address are not theirs to hear.
        if not self.run.rate_key or self.run.rate_key.startswith(SHARED_BUCKET_PREFIXES):
            return None
        return builtins.desk().open_ticket_number(
            project_id=self.run.project_id, rate_key=self.run.rate_key, is_test=self.run.sandbox
        )

    def _decide(self, call: ToolCall, request: ToolCallRequest, round_number: int) -> Decision:
        """The policy check's decision for `call`, written onto it (in memory)."""
        decision = policy_check(self._policy_context(call, round_number), request.name, request.arguments)
        spec = decision.spec
        call.name = decision.name[:64]
        call.kind = str(spec.kind) if spec else ""
        call.effect = str(spec.effect) if spec else ""
        call.arguments = decision.arguments if isinstance(decision.arguments, (dict, list)) else None
        call.arguments_hash = decision.arguments_hash
        call.policy_decision = "allowed" if decision.allowed else "refused"
        call.policy_code = decision.code
        return decision

    def _approved(self, call: ToolCall) -> bool:
        """A person approved this call (`once`), or this tool for the rest of the session (`session`). In a check's
        run a call that would wait for approval counts as approved (and, being a sandbox run, is simulated)."""
        if self.run.check_options is not None:
            return True
        if isinstance(call.approval, dict) and call.approval.get("decision") == "approve":
            return True
        if self.run.session_id is None:
            return False
        if self._session_approved is None:
            self._session_approved = session_approvals(self.run.session_id)
        approval = self._session_approved.get(call.name)
        if approval is None:
            return False
        # The call records the approval it runs under (who, when, on which call), as one decided for it does: in the
        # round's write, or in the write that records its outcome (`_decision_fields`, store.mark_running).
        call.approval = dict(approval)
        return True

    def _answer_from_check(self, call: ToolCall) -> None:
        """A client tool call of a check's run, answered with the check's `client_outputs` (an error without one)."""
        outputs = (self.run.check_options or {}).get("client_outputs") or {}
        given = call.name in outputs
        output = outputs[call.name] if given else {"error": f"the check gives no output for {call.name}"}
        call.status = ToolCall.Status.SUCCEEDED if given else ToolCall.Status.FAILED
        call.result, call.finished_at = client_output_shown(call.name, output, not given), timezone.now()

    def _outcome_without_side_effects(self, call: ToolCall, decision: Decision) -> bool:
        """Sets what a decided call leads to when that needs nothing to run: refused, simulated (test panel),
        waiting for the app (client tools), or about to be sent (HTTP and MCP tools). False for a built-in: it runs
        here."""
        spec = decision.spec
        now = timezone.now()
        if not decision.allowed:
            call.status, call.result, call.finished_at = ToolCall.Status.REFUSED, decision.model_result(), now
            return True
        assert spec is not None  # an allowed call is always of a tool in the tool set
        if spec.approval and not self._approved(call):
            call.status = ToolCall.Status.AWAITING_APPROVAL  # nothing runs before a person decides
            return True
        if self.run.sandbox and spec.effect == "action" and not self.run.run_real_actions:
            # Test panel: action tools answer as if they ran and send nothing (seed, "In the test panel").
            call.status, call.result, call.finished_at = ToolCall.Status.SUCCEEDED, dict(SIMULATED), now
            call.simulated = True
            return True
        if spec.kind == "client":
            if self.run.check_options is not None:  # a check answers its client tools with its given outputs
                self._answer_from_check(call)
                return True
            call.status = ToolCall.Status.AWAITING_OUTPUT
            return True
        if spec.kind in CALLS_OUT:
            call.status, call.attempts, call.started_at = ToolCall.Status.RUNNING, call.attempts + 1, now
            return True
        return False

    def _decide_first(self, calls: list[ToolCall], request: ToolCallRequest, round_number: int) -> bool:
        """Decides the round's first call before the round is written (on a copy, put in its place when decided).
        A built-in is left undecided: it runs, and is decided, in the round, after the fenced heartbeat that notices
        a cancel."""
        candidate = copy.copy(calls[0])
        if self._outcome_without_side_effects(candidate, self._decide(candidate, request, round_number)):
            calls[0] = candidate
            return True
        return False


def client_output_shown(name: str, output: Any, is_error: bool) -> dict[str, Any]:
    """A client tool's output as the model sees it: cleaned, marked as data."""
    from tools.shaping import clean_value

    cleaned = clean_value(output)
    if is_error:
        return {
            "ok": False,
            "error": {
                "code": "client_tool_failed",
                "guidance": "The app reported that this did not work. Tell the customer; don't present it as done.",
                "details": cleaned,
            },
        }
    return {"ok": True, "data": {"notice": DATA_NOTICE, "tool": name, "output": cleaned}}
