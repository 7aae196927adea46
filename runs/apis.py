"""`/v1/sessions…` and `/v1/runs…`. Publishable keys may create sessions and runs and use their own."""

from __future__ import annotations

import time
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from kagent.api import ProjectApi, paginate, request_object, unix
from kagent.errors import Unprocessable
from kagent.openapi import NULLABLE_TIMESTAMP, TIMESTAMP, component, json_body, list_of
from runs import selectors, services
from runs.models import Message, Run, RunStep, Session, ToolCall

MAX_WAIT = 30.0
POLL_INTERVAL = 0.1

RUN_SCHEMA = component(
    "Run",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string", "example": "run_01j…"},
            "object": {"const": "run"},
            "status": {"enum": [s.value for s in Run.Status]},
            "agent": {"type": "string"},
            "version": {"type": ["integer", "null"]},
            "session": {"type": ["string", "null"]},
            "sandbox": {"type": "boolean"},
            "store": {"type": "boolean"},
            "input": {"type": ["string", "null"]},
            "output": {
                "type": ["object", "null"],
                "properties": {"text": {"type": "string"}, "unverified_claims": {"type": "array"}},
            },
            "last_error": {"type": ["object", "null"]},
            "cancellation_reason": {"enum": ["requested", "superseded", None]},
            "required_action": {"type": ["object", "null"]},
            "rounds": {"type": "integer"},
            "usage": {"type": "object"},
            "metadata": {"type": "object"},
            "created_at": TIMESTAMP,
            "started_at": NULLABLE_TIMESTAMP,
            "completed_at": NULLABLE_TIMESTAMP,
        },
    },
)
RUN_CREATE = json_body(
    {
        "type": "object",
        "required": ["agent", "input"],
        "properties": {
            "agent": {"type": "string"},
            "version": {"type": "integer", "minimum": 1},
            "session": {"type": "string"},
            "input": {"type": "string", "maxLength": 20000},
            "end_user": {"type": "object", "properties": {"external_id": {"type": "string"}, "traits": {}}},
            "end_user_token": {"type": "string"},
            "store": {"type": "boolean", "default": True},
            "allow_actions": {"type": "boolean", "default": False},
            "sandbox": {"type": "boolean", "default": False},
            "run_real_actions": {"type": "boolean", "default": False},
            "metadata": {"type": "object"},
            "wait": {"type": "number", "minimum": 0, "maximum": 30},
        },
    }
)
SESSION_SCHEMA = component(
    "Session",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string", "example": "ses_01j…"},
            "object": {"const": "session"},
            "agent": {"type": "string"},
            "end_user": {"type": ["object", "null"]},
            "metadata": {"type": "object"},
            "flagged": {"type": "boolean"},
            "created_at": TIMESTAMP,
        },
    },
)
STEP_SCHEMA = component("RunStep", {"type": "object"})
MESSAGE_SCHEMA = component(
    "Message",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "role": {"enum": ["user", "assistant"]},
            "content": {"type": "string"},
            "run": {"type": "string"},
            "created_at": TIMESTAMP,
        },
    },
)


def render_run(run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "object": "run",
        "status": run.status,
        "agent": run.agent_id,
        "version": run.version_number,
        "session": run.session_id,
        "sandbox": run.sandbox,
        "store": run.store,
        "input": None if run.purged_at else run.input,
        "output": run.output if run.status == Run.Status.COMPLETED else None,
        "last_error": run.last_error,
        "cancellation_reason": run.cancellation_reason or None,
        "required_action": run.required_action if run.status == Run.Status.REQUIRES_ACTION else None,
        "rounds": run.rounds,
        "usage": {
            "input_tokens": (run.usage or {}).get("input_tokens", 0),
            "output_tokens": (run.usage or {}).get("output_tokens", 0),
        },
        "metadata": run.metadata,
        "created_at": unix(run.created_at),
        "started_at": unix(run.started_at),
        "completed_at": unix(run.completed_at),
    }


def render_session(session: Session) -> dict[str, Any]:
    end_user = session.end_user
    return {
        "id": session.pk,
        "object": "session",
        "agent": session.agent_id,
        "end_user": {"external_id": end_user.external_id, "verified": True} if end_user else None,
        "metadata": session.metadata,
        "flagged": session.flagged,
        "created_at": unix(session.created_at),
    }


def render_message(message: Message) -> dict[str, Any]:
    return {
        "id": message.pk,
        "object": "message",
        "role": message.role,
        "content": message.content,
        "run": message.run_id,
        "created_at": unix(message.created_at),
    }


def render_tool_call_step(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.pk,
        "object": "run_step",
        "kind": "tool_call",
        "round": call.round,
        "created_at": unix(call.created_at),
        "duration_ms": int((call.finished_at - call.started_at).total_seconds() * 1000)
        if call.finished_at and call.started_at
        else None,
        "tool_call": {
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
            "attempts": call.attempts,
            "shown_to_model": call.result,
            "upstream": call.upstream,
        },
    }


def render_step(step: RunStep) -> dict[str, Any]:
    return {
        "id": step.pk,
        "object": "run_step",
        "kind": step.kind,
        "round": step.round,
        "created_at": unix(step.created_at),
        "duration_ms": step.duration_ms,
        step.kind: step.data,
    }


def _deliver(run: Run) -> dict[str, Any]:
    """The run as the caller sees it; a `store: false` run's content is deleted once its result was returned."""
    body = render_run(run)
    if not run.store and run.status in Run.TERMINAL and run.purged_at is None:
        services.run_purge(run=run)
    return body


def _wait_seconds(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_WAIT:
        raise Unprocessable("invalid_request", "wait is a number of seconds from 0 to 30.")
    return float(value)


class SessionCreateApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(
        operation_id="sessions_create", request=json_body({"type": "object"}), responses={201: SESSION_SCHEMA}
    )
    def post(self, request: Request) -> Response:
        session = services.session_create(project=self.project, api_key=self.api_key, data=request_object(request))
        return Response(render_session(session), status=status.HTTP_201_CREATED)


class SessionDetailApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(operation_id="sessions_retrieve", responses={200: SESSION_SCHEMA})
    def get(self, request: Request, session_id: str) -> Response:
        return Response(
            render_session(selectors.session_get(project=self.project, api_key=self.api_key, session_id=session_id))
        )


class SessionMessagesApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(operation_id="sessions_messages_list", responses=list_of(MESSAGE_SCHEMA))
    def get(self, request: Request, session_id: str) -> Response:
        session = selectors.session_get(project=self.project, api_key=self.api_key, session_id=session_id)
        return Response(paginate(request, selectors.session_messages(session=session), render_message))


class RunCreateApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(operation_id="runs_create", request=RUN_CREATE, responses={201: RUN_SCHEMA, 200: RUN_SCHEMA})
    def post(self, request: Request) -> Response:
        data = request_object(request)
        wait = _wait_seconds(data.get("wait"))
        run = services.run_create(
            project=self.project, api_key=self.api_key, data=data, client_ip=request.META.get("REMOTE_ADDR", "")
        )
        if wait:
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                run.refresh_from_db()
                if run.status in Run.TERMINAL or run.status == Run.Status.REQUIRES_ACTION:
                    return Response(_deliver(run), status=status.HTTP_200_OK)
                time.sleep(POLL_INTERVAL)
            run.refresh_from_db()
        return Response(_deliver(run), status=status.HTTP_201_CREATED)


class RunDetailApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(operation_id="runs_retrieve", responses={200: RUN_SCHEMA})
    def get(self, request: Request, run_id: str) -> Response:
        run = selectors.run_get(project=self.project, api_key=self.api_key, run_id=run_id)
        services.run_expire_if_due(run=run)
        return Response(_deliver(run))


class RunStepsApi(ProjectApi):
    # Steps hold upstream statuses and bodies: for the business's server, not for browsers.
    @extend_schema(operation_id="runs_steps_list", responses=list_of(STEP_SCHEMA))
    def get(self, request: Request, run_id: str) -> Response:
        run = selectors.run_get(project=self.project, api_key=self.api_key, run_id=run_id)
        steps, calls = selectors.run_steps(run=run)
        # In the order things happened: the model call at round r, then the tool calls it asked for (round r + 1,
        # in the order asked), then the next model call.
        ordered = [((s.round, 0, s.created_at.timestamp()), render_step(s)) for s in steps]
        ordered += [((c.round - 1, 1, c.index), render_tool_call_step(c)) for c in calls]
        ordered.sort(key=lambda pair: pair[0])
        return Response({"data": [item for _, item in ordered], "next": None})


class RunSubmitToolOutputsApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(
        operation_id="runs_submit_tool_outputs",
        request=json_body(
            {
                "type": "object",
                "required": ["tool_outputs"],
                "properties": {
                    "tool_outputs": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["call_id"],
                            "properties": {
                                "call_id": {"type": "string"},
                                "output": {},
                                "is_error": {"type": "boolean"},
                            },
                        },
                    }
                },
            }
        ),
        responses={200: RUN_SCHEMA},
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = selectors.run_get(project=self.project, api_key=self.api_key, run_id=run_id)
        return Response(render_run(services.run_submit_tool_outputs(run=run, data=request_object(request))))


class RunCancelApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(operation_id="runs_cancel", request=None, responses={200: RUN_SCHEMA})
    def post(self, request: Request, run_id: str) -> Response:
        run = selectors.run_get(project=self.project, api_key=self.api_key, run_id=run_id)
        return Response(_deliver(services.run_cancel(run=run, reason="requested")))
