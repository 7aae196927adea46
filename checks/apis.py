"""`/v1/agents/{id}/checks…`, `/v1/agents/{id}/check_runs/{id}`, publishing (which runs the checks first) and a
version's figures: one API class per operation; each parses its body, calls one service or selector, renders."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from agents import selectors
from agents.resources import METRICS, VERSION
from checks import selectors as check_selectors
from checks import services
from checks.resources import CHECK, CHECK_RUN
from kagent.api import ProjectApi, paginate, param_time
from kagent.errors import Unprocessable
from kagent.inputs import Input, is_set
from kagent.openapi import list_of
from runs import selectors as run_selectors


@dataclass(frozen=True)
class PublishInput:
    note: str | None
    force: bool


PUBLISH = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "note": {
                "type": ["string", "null"],
                "maxLength": 1000,
                "default": "",
                "x-message": "The note is text of at most 1000 characters.",
            },
            "force": {
                "type": "boolean",
                "default": False,
                "description": "publish although checks fail (with a note saying why); the version records it",
                "x-message": "force is true or false.",
            },
        },
    },
    PublishInput,
)


_TEXT_LIST = {"type": "array", "maxItems": 20, "items": {"type": "string", "minLength": 1, "maxLength": 500}}
_NAME_LIST = {"type": "array", "maxItems": 20, "items": {"type": "string", "minLength": 1, "maxLength": 64}}


@dataclass(frozen=True)
class CheckWrite:
    name: str
    input: Any
    end_user: dict[str, Any] | None
    client_outputs: dict[str, Any]
    expect: dict[str, Any]
    from_run: str | None


CHECK_WRITE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "pattern": r"\S",  # linear: one character
                "x-message": "Give the check a name of at most 200 characters.",
            },
            "input": {
                "anyOf": [
                    {"type": "string", "minLength": 1, "maxLength": 20000},
                    {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 10,
                        "items": {"type": "string", "minLength": 1, "maxLength": 20000},
                    },
                ],
                "x-message": "input is the customer's message, or a list of 1 to 10 of them.",
            },
            "end_user": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "required": ["external_id"],
                "properties": {
                    "external_id": {"type": "string", "minLength": 1, "maxLength": 200},
                    "traits": {"type": "object", "maxProperties": 20},
                },
                "x-message": 'end_user is {"external_id", "traits"} or null.',
            },
            "client_outputs": {
                "type": "object",
                "maxProperties": 32,
                "default": {},
                "description": "{client tool name: the output the app would give}",
                "x-message": "client_outputs is a JSON object of at most 32 client tool names and their outputs.",
            },
            "expect": {
                "type": "object",
                "additionalProperties": False,
                "default": {},
                "properties": {
                    "tools_called": _NAME_LIST,
                    "tools_not_called": _NAME_LIST,
                    "output_contains": _TEXT_LIST,
                    "output_not_contains": _TEXT_LIST,
                    "status": {"enum": ["completed", "failed", "requires_action", "cancelled"]},
                },
                "x-message": "expect is {tools_called, tools_not_called, output_contains, output_not_contains, "
                "status}.",
            },
            "from_run": {
                "type": "string",
                "maxLength": 100,
                "description": "make the check from a run of this agent: its input, end user and the tools it called",
                "x-message": "from_run is the id of a run of this agent.",
            },
        },
    },
    CheckWrite,
)


def check_fields(agent: Any, body: CheckWrite, *, creating: bool) -> dict[str, Any]:
    """The check's fields from the body; with `from_run`, made from that run, what the body gives besides winning."""
    keys = ("name", "input", "end_user", "client_outputs", "expect")
    given = {key: getattr(body, key) for key in keys if is_set(getattr(body, key))}
    if is_set(body.from_run) and body.from_run is not None:
        made = services.check_from_run(agent=agent, run_id=body.from_run, name=given.get("name"))
        return {**made, **{key: value for key, value in given.items() if value is not None}}
    if creating:
        for key in ("name", "input"):
            if given.get(key) is None:
                message = f"{key} is required (or from_run)."
                raise Unprocessable("invalid_request", message, details=[{"path": f"$.{key}", "message": message}])
    return given


@dataclass(frozen=True)
class CheckRunInput:
    version: int | None


CHECK_RUN_INPUT = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "version": {
                "type": ["integer", "null"],
                "minimum": 1,
                "description": "a published version to check; default (null) the draft",
                "x-message": "version is the number of a published version, or null for the draft.",
            }
        },
    },
    CheckRunInput,
)


class AgentPublishApi(ProjectApi):
    @extend_schema(
        operation_id="agents_publish",
        request=PUBLISH.body,
        responses={201: VERSION.ref},
        description="Runs the agent's checks on the draft first (concurrently) and answers when they are done: a "
        "failure is 409 checks_failed naming the failing checks and why, unless force is true (with a note); the "
        "version then records forced and the failures.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        body = PUBLISH.parse(request.data or {})
        version = services.publish_checked(agent=agent, note=body.note, force=body.force)
        return Response(VERSION.render(version), status=status.HTTP_201_CREATED)


class AgentCheckListCreateApi(ProjectApi):
    @extend_schema(operation_id="agents_checks_list", responses=list_of(CHECK.ref))
    def get(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(paginate(request, check_selectors.check_list(agent=agent), CHECK.render))

    @extend_schema(
        operation_id="agents_checks_create",
        request=CHECK_WRITE.body,
        responses={201: CHECK.ref},
        description=f"At most {services.MAX_CHECKS} checks an agent (422 too_many_checks).",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        body = CHECK_WRITE.parse(request.data, partial=True)
        check = services.check_create(agent=agent, fields=check_fields(agent, body, creating=True))
        return Response(CHECK.render(check), status=status.HTTP_201_CREATED)


class AgentCheckDetailApi(ProjectApi):
    @extend_schema(operation_id="agents_checks_retrieve", responses={200: CHECK.ref})
    def get(self, request: Request, agent_id: str, check_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(CHECK.render(check_selectors.check_get(agent=agent, check_id=check_id)))

    @extend_schema(operation_id="agents_checks_update", request=CHECK_WRITE.body, responses={200: CHECK.ref})
    def patch(self, request: Request, agent_id: str, check_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        check = check_selectors.check_get(agent=agent, check_id=check_id)
        body = CHECK_WRITE.parse(request.data, partial=True)
        return Response(
            CHECK.render(services.check_update(check=check, fields=check_fields(agent, body, creating=False)))
        )

    @extend_schema(operation_id="agents_checks_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, agent_id: str, check_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        check = check_selectors.check_get(agent=agent, check_id=check_id)
        check.delete()
        return Response({"id": check_id, "object": "check", "deleted": True})


class AgentCheckRunCreateApi(ProjectApi):
    @extend_schema(
        operation_id="agents_checks_run",
        request=CHECK_RUN_INPUT.body,
        responses={201: CHECK_RUN.ref},
        description="Runs every check of the agent in the sandbox against the draft (or a published version) and "
        "answers at once with the check run (status running); follow it at /v1/agents/{id}/check_runs/{rid}.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        body = CHECK_RUN_INPUT.parse(request.data or {})
        check_run = services.check_run_start(agent=agent, version=body.version)
        return Response(CHECK_RUN.render(check_run), status=status.HTTP_201_CREATED)


class AgentCheckRunDetailApi(ProjectApi):
    @extend_schema(operation_id="agents_check_runs_retrieve", responses={200: CHECK_RUN.ref})
    def get(self, request: Request, agent_id: str, check_run_id: str) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        return Response(CHECK_RUN.render(check_selectors.check_run_get(agent=agent, check_run_id=check_run_id)))


# --- a published version's figures (`/v1/agents/{id}/versions/{n}/metrics`), read from its runs ------------------


class AgentVersionMetricsApi(ProjectApi):
    @extend_schema(
        operation_id="agents_versions_metrics",
        parameters=[OpenApiParameter("since", str, description="Unix seconds or an ISO date; default 7 days ago")],
        responses={200: METRICS.ref},
    )
    def get(self, request: Request, agent_id: str, number: int) -> Response:
        agent = selectors.agent_get(project=self.project, agent_id=agent_id)
        version = selectors.version_get(agent=agent, number=number)
        since = param_time(request.query_params, "since") or timezone.now() - timedelta(
            days=run_selectors.METRICS_DEFAULT_DAYS
        )
        return Response(METRICS.render(run_selectors.version_metrics(agent=agent, version=version, since=since)))
