"""How sessions, runs, their steps and messages look in the API (rendered and in the OpenAPI document). Webhook
events carry the same renderings. The desk's tickets and handoffs: desk/resources.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import guard
from kagent.openapi import component
from kagent.rendering import OMIT, Const, Field, Resource, Timestamp
from runs.models import Run, RunStep, ToolCall

_ID = {"type": "string"}
_NULLABLE_ID = {"type": ["string", "null"]}


def _usage(run: Run) -> dict[str, int]:
    usage = run.usage or {}
    return {"input_tokens": usage.get("input_tokens", 0), "output_tokens": usage.get("output_tokens", 0)}


def _output(run: Run) -> dict[str, Any] | None:
    """A completed run's output; one completed before the guard listed kinds carries its claims as actions."""
    output = run.output
    if isinstance(output, dict) and "claims" not in output:
        claims = output.get("unverified_claims") or []
        output = {**output, "claims": [{"kind": guard.UNBACKED_ACTION, "text": str(text)} for text in claims]}
    return output


RUN: Resource[Run] = Resource(
    "Run",
    {
        "id": Field({"type": "string", "example": "run_01j…"}, "pk"),
        "object": Const("run"),
        "status": Field({"enum": [s.value for s in Run.Status]}, "status"),
        "agent": Field(_ID, "agent_id"),
        "version": Field(
            {"type": ["integer", "null"], "description": "the agent version it runs; null: the draft (sandbox)"},
            "version_number",
        ),
        "session": Field({**_NULLABLE_ID, "description": "null: a one-shot run"}, "session_id"),
        "sandbox": Field({"type": "boolean"}, "sandbox"),
        "store": Field({"type": "boolean"}, "store"),
        "input": Field(
            {"type": ["string", "null"], "description": "null once a `store: false` run's content was deleted"},
            lambda run: None if run.purged_at else run.input,
        ),
        "output": Field(
            {
                "type": ["object", "null"],
                "description": "on `completed` only",
                "required": ["text", "unverified_claims", "claims"],
                "properties": {
                    "text": {"type": "string", "description": "the model's answer as written (Markdown kept)"},
                    "unverified_claims": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "the texts of `claims`",
                    },
                    "claims": {
                        "type": "array",
                        "description": (
                            "what the truthfulness guard found nothing in the conversation to back: a reference or a "
                            "figure no source gives, an action no call did (usually empty)"
                        ),
                        "items": {
                            "type": "object",
                            "required": ["kind", "text"],
                            "properties": {"kind": {"enum": list(guard.KINDS)}, "text": {"type": "string"}},
                        },
                    },
                },
            },
            lambda run: _output(run) if run.status == Run.Status.COMPLETED else None,
        ),
        "last_error": Field(
            {
                "type": ["object", "null"],
                "required": ["code", "message"],
                "properties": {
                    "code": {"enum": ["tool_outputs_expired", "model_error", "internal_error"]},
                    "message": {"type": "string"},
                },
            },
            "last_error",
        ),
        "cancellation_reason": Field(
            {"enum": ["requested", "superseded", None]}, lambda run: run.cancellation_reason or None
        ),
        "required_action": Field(
            {
                "type": ["object", "null"],
                "description": "on `requires_action` only: the app's outputs for client tools "
                "(`submit_tool_outputs`), or a person's decision on actions (`approve_tool_calls`; a publishable key "
                "sees only that the run waits, and until when)",
                "required": ["type", "expires_at"],
                "properties": {
                    "type": {"enum": ["submit_tool_outputs", "approve_tool_calls"]},
                    "expires_at": {"type": "integer", "description": "Unix seconds"},
                    "tool_calls": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["call_id", "name", "arguments"],
                            "properties": {
                                "call_id": {"type": "string"},
                                "name": {"type": "string"},
                                "arguments": {"type": "object"},
                            },
                        },
                    },
                },
            },
            lambda run: run.required_action if run.status == Run.Status.REQUIRES_ACTION else None,
        ),
        "rounds": Field({"type": "integer"}, "rounds"),
        "usage": Field(
            {
                "type": "object",
                "required": ["input_tokens", "output_tokens"],
                "properties": {"input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"}},
            },
            _usage,
        ),
        "metadata": Field({"type": "object"}, "metadata"),
        "created_at": Timestamp("created_at"),
        "started_at": Timestamp("started_at", nullable=True),
        "completed_at": Timestamp("completed_at", nullable=True),
    },
)


def _duration_ms(call: ToolCall) -> int | None:
    if call.finished_at and call.started_at:
        return int((call.finished_at - call.started_at).total_seconds() * 1000)
    return None


def _tool_call_detail(call: ToolCall) -> dict[str, Any]:
    return {
        "call_id": call.pk,
        "name": call.name or None,
        "requested_name": call.requested_name,
        "kind": call.kind or None,
        "effect": call.effect or None,
        "arguments": call.arguments,
        "arguments_hash": call.arguments_hash or None,
        "policy": {"decision": call.policy_decision or None, "code": call.policy_code or None},
        "status": call.status,
        "simulated": call.simulated,
        "approval": call.approval,
        "attempts": call.attempts,
        "shown_to_model": call.result,
        # Steps written before the address left them still hold it: never shown (it is in the egress log).
        "upstream": {k: v for k, v in call.upstream.items() if k != "resolved_address"}
        if isinstance(call.upstream, dict)
        else call.upstream,
    }


_NULLABLE_OBJECT = {"type": ["object", "null"]}
_STRING_OR_NULL = {"type": ["string", "null"]}

# A run's steps are its model calls, notices and quoted tool calls (RunStep rows) and its tool calls (ToolCall
# rows), in the order they happened; each carries its detail under the key named by its kind.
MODEL_STEP: Resource[RunStep] = Resource(
    "RunModelStep",
    {
        "id": Field(_ID, "pk"),
        "object": Const("run_step"),
        "kind": Field({"enum": ["model_call", "notice", "quoted_tool_call"]}, "kind"),
        "round": Field({"type": "integer"}, "round"),
        "created_at": Timestamp("created_at"),
        "duration_ms": Field({"type": "integer"}, "duration_ms"),
        "model_call": Field(
            {"type": "object", "description": "the model, tokens, what it answered"},
            lambda step: step.data if step.kind == RunStep.Kind.MODEL_CALL else OMIT,
            optional=True,
        ),
        "notice": Field(
            {"type": "object", "description": "an answer pushed back to the model by the truthfulness guard"},
            lambda step: step.data if step.kind == RunStep.Kind.NOTICE else OMIT,
            optional=True,
        ),
        "quoted_tool_call": Field(
            {"type": "object", "description": "a tool call written as text that repeats an input of the run: not run"},
            lambda step: step.data if step.kind == RunStep.Kind.QUOTED_TOOL_CALL else OMIT,
            optional=True,
        ),
    },
)

TOOL_CALL_STEP: Resource[ToolCall] = Resource(
    "RunToolCallStep",
    {
        "id": Field(_ID, "pk"),
        "object": Const("run_step"),
        "kind": Const("tool_call"),
        "round": Field({"type": "integer"}, "round"),
        "created_at": Timestamp("created_at"),
        "duration_ms": Field({"type": ["integer", "null"]}, _duration_ms),
        "tool_call": Field(
            {
                "type": "object",
                "description": "everything about the call, including what the model was not shown (upstream "
                "status and body excerpt, secrets masked)",
                "properties": {
                    "call_id": _ID,
                    "name": _STRING_OR_NULL,
                    "requested_name": {"type": "string"},
                    "kind": {"enum": ["builtin", "http", "mcp", "client", None]},
                    "effect": {"enum": ["read", "action", "escalation", None]},
                    "arguments": {},
                    "arguments_hash": _STRING_OR_NULL,
                    "policy": {
                        "type": "object",
                        "properties": {"decision": {"enum": ["allowed", "refused", None]}, "code": _STRING_OR_NULL},
                    },
                    "status": {"enum": [s.value for s in ToolCall.Status]},
                    "simulated": {"type": "boolean"},
                    "approval": {
                        "type": ["object", "null"],
                        "description": "a person's decision on a call that waited for approval: decision (approve "
                        "| deny | expired), scope, note, decided_by, decided_at; a call allowed by an earlier "
                        "`scope: session` approval carries that one, with `given_on` the call it was given on",
                    },
                    "attempts": {"type": "integer"},
                    "shown_to_model": _NULLABLE_OBJECT,
                    "upstream": _NULLABLE_OBJECT,
                },
            },
            _tool_call_detail,
        ),
    },
)

RUN_STEP = component("RunStep", {"oneOf": [MODEL_STEP.ref, TOOL_CALL_STEP.ref]})


# What a browser (a publishable key) is told of a failed run: the code and neutral words. The message the business
# reads with its secret key may name its model's host, its secret's name, an upstream's status: not for visitors.
BROWSER_ERROR_MESSAGES = {
    "model_error": "The assistant could not answer just now. Please try again.",
    "tool_outputs_expired": "The app did not answer in time.",
    "internal_error": "Something went wrong on our side.",
}


def for_browser(rendered: dict[str, Any]) -> dict[str, Any]:
    """A rendered run as a publishable key is shown it: `last_error.message` in neutral words; of a wait for a
    person's approval only that it waits and until when (the customer doesn't see, or approve, the business's call)."""
    action = rendered.get("required_action")
    if isinstance(action, dict) and action.get("type") == "approve_tool_calls":
        rendered["required_action"] = {"type": action["type"], "expires_at": action.get("expires_at")}
    error = rendered.get("last_error")
    if isinstance(error, dict):
        code = str(error.get("code"))
        rendered["last_error"] = {
            "code": code,
            "message": BROWSER_ERROR_MESSAGES.get(code, BROWSER_ERROR_MESSAGES["internal_error"]),
        }
    return rendered


# --- an approval: a call waiting for a person's decision, as webhooks and the dashboard show it --------------------


@dataclass(frozen=True)
class Approval:
    run: Run
    call: ToolCall
    expires_at: int | None  # Unix seconds: until when a person may decide


def approval_status(call: ToolCall) -> str:
    """waiting | approved | denied | expired | cancelled (the run ended before anyone decided)."""
    decision = (call.approval or {}).get("decision")
    if decision is None:
        return "waiting" if call.status == ToolCall.Status.AWAITING_APPROVAL else "cancelled"
    return {"approve": "approved", "deny": "denied"}.get(str(decision), "expired")


APPROVAL: Resource[Approval] = Resource(
    "Approval",
    {
        "id": Field({"type": "string", "description": "the tool call's id"}, lambda a: a.call.pk),
        "object": Const("approval"),
        "run": Field(_ID, lambda a: a.run.pk),
        "session": Field(_NULLABLE_ID, lambda a: a.run.session_id),
        "agent": Field(_ID, lambda a: a.run.agent_id),
        "call_id": Field(_ID, lambda a: a.call.pk),
        "name": Field({"type": "string", "description": "the tool"}, lambda a: a.call.name),
        "arguments": Field(
            {"type": ["object", "array", "null"], "description": "null for a `store: false` run"},
            # A `store: false` run's webhooks carry ids and statuses only (runs/webhook_events.py), its arguments too.
            lambda a: (a.call.arguments or {}) if a.run.store else None,
        ),
        "status": Field(
            {"enum": ["waiting", "approved", "denied", "expired", "cancelled"]}, lambda a: approval_status(a.call)
        ),
        "expires_at": Field({"type": ["integer", "null"], "description": "Unix seconds"}, "expires_at"),
        "decision": Field(
            {"type": ["object", "null"], "description": "who decided, how (`decision`, `scope`, `note`) and when"},
            lambda a: a.call.approval,
        ),
        "created_at": Field(
            {"type": "integer", "description": "Unix seconds"}, lambda a: int(a.call.created_at.timestamp())
        ),
    },
)
