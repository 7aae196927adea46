"""A run read (`GET /v1/runs/{id}`), followed (`/events`) and its steps (`/steps`)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from conversations.apis import end_user_token
from kagent.api import (
    ProjectApi,
)
from kagent.openapi import list_of
from kagent.streams import EventStreamApi
from runs import lifecycle, selectors, streams
from runs.apis import deliver
from runs.models import RunStep, ToolCall
from runs.resources import MODEL_STEP, RUN, RUN_STEP, TOOL_CALL_STEP


class RunDetailApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(operation_id="runs_retrieve", responses={200: RUN.ref})
    def get(self, request: Request, run_id: str) -> Response:
        run = selectors.run_get(
            project=self.project, run_id=run_id, key=self.api_key, end_user_token=end_user_token(request)
        )
        lifecycle.run_expire_if_due(run=run)
        return Response(deliver(run, self.api_key))


EVENTS_DESCRIPTION = (
    "Server-Sent Events: `event:` run.queued, run.in_progress, run.step.created, run.output.delta, run.output.reset, "
    "run.requires_action, run.completed, run.failed, run.cancelled; `data:` the run as the API renders it (or the "
    "step, as the steps API does — a publishable key sees what happened, not the business's data, and in "
    "`tool_call.receipt` the handoff or the ticket number a built-in tool really made). run.output.delta is "
    '`{"run": "run_…", "delta": "…"}`: the answer\'s text as the model writes it, a sentence at a time, released only '
    'once the truthfulness guard passed it; run.output.reset (`{"run"}`) discards what was shown (the text was '
    "not the answer: a tool round, a push-back). When the run completes with no `unverified_claims`, the deltas after "
    "the last reset join into `output.text`; when claims remain, the stream ends on a reset: show a neutral reply, "
    "never the claim. `id:` resume after it with Last-Event-ID. The stream ends after a terminal event or "
    "run.requires_action; a comment every 15 s keeps it open. Resuming after the last event of a run that ended "
    "answers 204 (an EventSource stops reconnecting)."
)


class RunEventsApi(EventStreamApi):
    @extend_schema(
        operation_id="runs_events",
        parameters=EventStreamApi.PARAMETERS,
        responses={
            (200, "text/event-stream"): OpenApiResponse(description=EVENTS_DESCRIPTION),
            204: OpenApiResponse(description="The run ended and every one of its events is behind Last-Event-ID."),
        },
        description=EVENTS_DESCRIPTION,
    )
    def get(self, request: Request, run_id: str) -> HttpResponseBase:
        run = selectors.run_get(
            project=self.project, run_id=run_id, key=self.api_key, end_user_token=end_user_token(request)
        )
        after, places = self.opened(request)
        return streams.event_stream(run, places, after=after, full_steps=self.api_key.is_secret)


class RunStepsApi(ProjectApi):
    # Steps hold upstream statuses and bodies: for the business's server, not for browsers.
    @extend_schema(operation_id="runs_steps_list", responses=list_of(RUN_STEP))
    def get(self, request: Request, run_id: str) -> Response:
        run = selectors.run_get(
            project=self.project, run_id=run_id, key=self.api_key, end_user_token=end_user_token(request)
        )
        return Response({"data": [render_step(step) for step in selectors.run_timeline(run=run)], "next": None})


def render_step(step: RunStep | ToolCall) -> dict[str, Any]:
    """A model call or notice, or a tool call, as the steps API shows it."""
    return MODEL_STEP.render(step) if isinstance(step, RunStep) else TOOL_CALL_STEP.render(step)
