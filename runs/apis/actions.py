"""What answers a paused run (the app's tool outputs, a person's approvals) and what cancels one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from conversations.apis import end_user_token
from kagent.api import (
    ProjectApi,
)
from kagent.inputs import Input
from runs import approvals, lifecycle, selectors
from runs.apis import deliver
from runs.resources import RUN


@dataclass(frozen=True)
class SubmitToolOutputs:
    tool_outputs: list[dict[str, Any]]
    end_user_token: str | None


SUBMIT_TOOL_OUTPUTS = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["tool_outputs"],
        "properties": {
            "tool_outputs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["call_id"],
                    "properties": {
                        "call_id": {"type": "string"},
                        "output": {"description": "any JSON, at most 16 KiB"},
                        "is_error": {"type": ["boolean", "null"]},
                    },
                },
                "description": "one output for every open call",
                "x-message": 'tool_outputs is a list of {"call_id", "output", "is_error"}.',
                "x-messages": {
                    "items": 'each output is {"call_id", "output", "is_error"}.',
                    "items/properties/call_id": "call_id is the string id of an open tool call.",
                    "items/properties/is_error": "is_error is true or false.",
                },
            },
            "end_user_token": {
                "type": "string",
                "description": "a verified end user's token, when a publishable key answers that user's run (or "
                "the X-End-User-Token header)",
                "x-message": "end_user_token is a JWT string.",
            },
        },
    },
    SubmitToolOutputs,
)


class RunSubmitToolOutputsApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(operation_id="runs_submit_tool_outputs", request=SUBMIT_TOOL_OUTPUTS.body, responses={200: RUN.ref})
    def post(self, request: Request, run_id: str) -> Response:
        body = SUBMIT_TOOL_OUTPUTS.parse(request.data)
        token = end_user_token(request) or body.end_user_token
        run = selectors.run_get(project=self.project, run_id=run_id, key=self.api_key, end_user_token=token)
        outputs = [
            lifecycle.ToolOutput(item["call_id"], item.get("output"), bool(item.get("is_error")))
            for item in body.tool_outputs
        ]
        return Response(deliver(lifecycle.run_submit_tool_outputs(run=run, tool_outputs=outputs), self.api_key))


@dataclass(frozen=True)
class ApproveToolCalls:
    decisions: list[dict[str, Any]]


APPROVE_TOOL_CALLS = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["decisions"],
        "properties": {
            "decisions": {
                "type": "array",
                "maxItems": 100,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["call_id", "decision"],
                    "properties": {
                        "call_id": {"type": "string", "maxLength": 100},
                        "decision": {"enum": list(approvals.DECISIONS)},
                        "scope": {"enum": list(approvals.SCOPES), "default": "once"},
                        "note": {"type": "string", "maxLength": approvals.NOTE_MAX},
                    },
                },
                "description": "one decision for every call waiting for approval",
                "x-message": 'decisions is a list of {"call_id", "decision", "scope", "note"}.',
                "x-messages": {
                    "items": 'each decision is {"call_id", "decision": "approve" | "deny", "scope", "note"}.',
                    "items/properties/call_id": "call_id is the string id of a call waiting for approval.",
                    "items/properties/decision": 'decision is "approve" or "deny".',
                    "items/properties/scope": 'scope is "once" (this call) or "session" (this tool, for the rest '
                    "of the conversation).",
                    "items/properties/note": f"note is text of at most {approvals.NOTE_MAX} characters.",
                },
            },
        },
    },
    ApproveToolCalls,
)


class RunApproveToolCallsApi(ProjectApi):
    # A person of the business decides, never the customer: the secret key (or the dashboard), not a publishable key.

    @extend_schema(
        operation_id="runs_approve_tool_calls",
        request=APPROVE_TOOL_CALLS.body,
        responses={200: RUN.ref},
        description="Answers a run waiting with required_action.type approve_tool_calls: every waiting call in one "
        "request (422 decisions_incomplete, unknown_call_id), only while it waits (409 run_not_awaiting_approval). "
        "Approved calls run (checked by the policy again), denied ones answer the model approval_denied.",
    )
    def post(self, request: Request, run_id: str) -> Response:
        body = APPROVE_TOOL_CALLS.parse(request.data)
        run = selectors.run_get(project=self.project, run_id=run_id, key=self.api_key, end_user_token=None)
        decisions = [
            approvals.ApprovalDecision(
                item["call_id"], item["decision"], item.get("scope", "once"), item.get("note", "").strip()
            )
            for item in body.decisions
        ]
        decided_by = approvals.DecidedBy("api_key", self.api_key.pk, self.api_key.name)
        return Response(
            RUN.render(approvals.run_approve_tool_calls(run=run, decisions=decisions, decided_by=decided_by))
        )


class RunCancelApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(operation_id="runs_cancel", request=None, responses={200: RUN.ref})
    def post(self, request: Request, run_id: str) -> Response:
        run = selectors.run_get(
            project=self.project, run_id=run_id, key=self.api_key, end_user_token=end_user_token(request)
        )
        return Response(deliver(lifecycle.run_cancel(run=run, reason="requested"), self.api_key))
