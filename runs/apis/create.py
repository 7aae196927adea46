"""`POST /v1/runs` (its body, its idempotency, the answer as JSON, after a wait, or as its event stream) and
`GET /v1/runs`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from django.utils.crypto import salted_hmac
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import renderers, status
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.mediatypes import media_type_matches

from conversations.apis import END_USER, END_USER_TOKEN, METADATA, TIME_FILTERS, end_user_claim, end_user_token
from kagent import throttle
from kagent.api import (
    ProjectApi,
    paginate,
    param_bool,
    param_choice,
    param_text,
    param_time,
)
from kagent.clients import client_address
from kagent.errors import OUTAGES, Unprocessable
from kagent.inputs import Input
from kagent.models import ApiKey
from kagent.openapi import empty_is_unset, list_of
from kagent.streams import StreamPlaces, owner_of
from runs import selectors, services, streams
from runs.apis import deliver
from runs.models import Run
from runs.resources import RUN

MAX_INPUT = 20_000
MAX_WAIT = 30.0

# --- runs ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunCreate:
    agent: str
    version: int | None
    session: str | None
    input: str
    end_user: dict[str, Any] | None
    end_user_token: str | None
    store: bool
    allow_actions: bool | None
    metadata: dict[str, Any]
    sandbox: bool | dict[str, Any]
    run_real_actions: bool | None
    wait: float
    stream: bool


RUN_CREATE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["agent", "input"],
        "properties": {
            "agent": {"type": "string", "x-message": "agent is required: the id of the agent to run."},
            "version": {
                "type": "integer",
                "minimum": 1,
                "description": "pin a published version; default: the latest",
                "x-message": "version is a published version number (1, 2, …).",
            },
            "session": {
                "type": "string",
                "description": "a session run; without it the run is one-shot",
                "x-message": "session is the id of a session.",
            },
            "input": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_INPUT,
                "pattern": r"\S",  # linear: one character
                "description": "the end user's message",
                "x-message": "Write the customer's message: input can't be empty.",
                "x-messages": {"maxLength": f"input is at most {MAX_INPUT} characters."},
            },
            "end_user": END_USER,
            "end_user_token": END_USER_TOKEN,
            "store": {"type": "boolean", "default": True, "x-message": "store is true or false."},
            "allow_actions": {
                "type": "boolean",
                "description": "one-shot runs only: offer action tools",
                "x-message": "allow_actions is true or false.",
            },
            "metadata": METADATA,
            "sandbox": {
                "oneOf": [
                    {"type": "boolean"},
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"run_real_actions": {"type": "boolean"}},
                    },
                ],
                "default": False,
                "description": 'run the draft, as the test panel does (secret key only): true, or {"run_real_actions": '
                "true} to let action tools really run",
                "x-message": 'sandbox is true/false or {"run_real_actions": true/false}.',
            },
            "run_real_actions": {
                "type": "boolean",
                "description": "sandbox runs only (the flat form of sandbox.run_real_actions)",
                "x-message": "run_real_actions is true or false.",
            },
            "wait": {
                "type": "number",
                "minimum": 0,
                "maximum": MAX_WAIT,
                "default": 0,
                "description": "seconds to wait for the run to end or pause before answering",
                "x-message": "wait is a number of seconds from 0 to 30.",
            },
            "stream": {
                "type": "boolean",
                "default": False,
                "description": "answer with the run's events (text/event-stream) instead of the run",
                "x-message": "stream is true or false.",
            },
        },
    },
    RunCreate,
)


def _sandbox(body: RunCreate) -> tuple[bool, bool]:
    """(sandbox, run_real_actions) from either form: `"sandbox": {"run_real_actions": true}` or the flat one."""
    if isinstance(body.sandbox, dict):
        if body.run_real_actions is not None:
            raise Unprocessable("invalid_request", "Give run_real_actions once, inside sandbox or beside it.")
        return True, bool(body.sandbox.get("run_real_actions", False))
    return body.sandbox, bool(body.run_real_actions)


IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
# What a request asks for, apart from how it wants the answer: the same key with `wait` or `stream` added is the same
# request sent again.
_ANSWER_ONLY = frozenset({"wait", "stream"})
_IDEMPOTENCY_SALT = "kagent.runs.idempotency"


def _idempotency(request: HttpRequest, key: ApiKey, data: Any) -> services.Idempotency | None:
    """The request's `Idempotency-Key` (1 to 255 printable ASCII characters, unique per API key) with a digest of
    what it asks for; None without the header."""
    raw = request.META.get("HTTP_IDEMPOTENCY_KEY")
    if raw is None:
        return None
    if not 1 <= len(raw) <= 255 or not all(" " <= c <= "~" for c in raw):
        raise Unprocessable(
            "invalid_parameter", f"{IDEMPOTENCY_KEY_HEADER} is 1 to 255 printable ASCII characters (a UUID, say)."
        )
    if not key.is_secret:
        # Every visitor of a site holds the publishable key: a key scoped to it would let one visitor's request
        # answer with another's run.
        raise Unprocessable("invalid_request", f"{IDEMPOTENCY_KEY_HEADER} is taken with a secret key only.")
    asked = {name: value for name, value in data.items() if name not in _ANSWER_ONLY}
    canonical = json.dumps(asked, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    # Keyed, so the digest kept with the run says nothing of its input (a `store: false` run's input is deleted).
    return services.Idempotency(raw, salted_hmac(_IDEMPOTENCY_SALT, canonical, algorithm="sha256").hexdigest())


class JsonOrEventStream(DefaultContentNegotiation):
    """`POST /v1/runs` answers with the run as JSON or, for `"stream": true`, with its events: a client may accept
    either (`Accept: text/event-stream`). Whatever isn't the stream (the run, an error) is JSON and says so."""

    def select_renderer(
        self, request: Request, choices: Iterable[renderers.BaseRenderer], format_suffix: str | None = None
    ) -> tuple[renderers.BaseRenderer, str]:
        offered = list(choices)
        try:
            chosen: tuple[renderers.BaseRenderer, str] = super().select_renderer(request, offered, format_suffix)
        except NotAcceptable:
            asked = self.get_accept_list(request)
            if request.method != "POST" or not any(media_type_matches("text/event-stream", kind) for kind in asked):
                raise
            json_renderer = offered[0]  # the view's renderers: JSON only
            return json_renderer, json_renderer.media_type
        return chosen


class RunCreateApi(ProjectApi):
    publishable_allowed = True
    content_negotiation_class = JsonOrEventStream

    @extend_schema(
        operation_id="runs_create",
        request=RUN_CREATE.body,
        responses={201: RUN.ref, 200: RUN.ref},
        description=(
            "Starts a run: the agent's latest published version (or the one `version` pins, or with `sandbox` its "
            "draft) answers `input`, one-shot or in `session`. Answers 201 with the run; with `wait`, 200 once the "
            "run has ended or paused within that many seconds (else 201 and `Retry-After`: read it again later); "
            'with `"stream": true`, 200 and its events (`text/event-stream`, as `GET /v1/runs/{run_id}/events`).'
        ),
        parameters=[
            OpenApiParameter(
                IDEMPOTENCY_KEY_HEADER,
                str,
                OpenApiParameter.HEADER,
                required=False,
                description=(
                    "Makes sending the request again safe (secret keys only): a request with a key this API key used "
                    "before answers with the run that request made (header `Idempotent-Replayed: true`) and starts "
                    "nothing; with another body it is refused, 409 `idempotency_key_reused`. 1 to 255 printable "
                    "ASCII characters, e.g. a UUID per run you mean to start."
                ),
            )
        ],
    )
    def post(self, request: Request) -> HttpResponseBase:
        key, data = self.api_key, request.data
        body = RUN_CREATE.parse(data)
        if body.stream and body.wait:
            raise Unprocessable("invalid_request", "Give stream or wait, not both.")
        idempotency = _idempotency(request, key, data)
        throttle.run_start(key, address=client_address(request))
        sandbox, run_real_actions = _sandbox(body)
        places = StreamPlaces.take(request, owner_of(request, key)) if body.stream else None
        try:
            run, replayed = RunCreateApi._run_create(request, key, body, sandbox, run_real_actions, idempotency)
        except BaseException:
            if places is not None:
                places.release()
            raise
        response: HttpResponseBase
        if places is not None:
            response = streams.event_stream(run, places, after=0, full_steps=key.is_secret)
        elif body.wait:
            owner = owner_of(request, key)
            settled = streams.wait_settled(run.pk, owner, body.wait, followed_until=run.followed_until)
            try:
                run.refresh_from_db()
            except OUTAGES:  # the run is committed: answer it as created rather than with an error to retry
                settled = False
            response = Response(deliver(run, key), status=status.HTTP_200_OK if settled else status.HTTP_201_CREATED)
            if not settled:
                response["Retry-After"] = "1"  # not settled (yet, or no place to wait): read it again with GET
        else:
            response = Response(deliver(run, key), status=status.HTTP_201_CREATED)
        if replayed:
            response["Idempotent-Replayed"] = "true"
        return response

    @staticmethod
    def _run_create(
        request: HttpRequest,
        key: ApiKey,
        body: RunCreate,
        sandbox: bool,
        run_real_actions: bool,
        idempotency: services.Idempotency | None,
    ) -> tuple[Run, bool]:
        create = RunCreateApi._create_options(request, key, body, sandbox, run_real_actions)
        if idempotency is not None:
            return services.run_create_once(idempotency=idempotency, **create)
        return services.run_create(**create), False

    @staticmethod
    def _create_options(
        request: HttpRequest, key: ApiKey, body: RunCreate, sandbox: bool, run_real_actions: bool
    ) -> services.RunRequest:
        return services.RunRequest(
            project=key.project,
            api_key=key,
            agent_id=body.agent,
            text=body.input,
            version=body.version,
            session_id=body.session,
            end_user=end_user_claim(body.end_user),
            end_user_token=body.end_user_token,
            store=body.store,
            allow_actions=body.allow_actions,
            metadata=body.metadata,
            sandbox=sandbox,
            run_real_actions=run_real_actions,
            client_ip=client_address(request),
            # Made followed by the stream or the wait it is made for: the follower then needs no write of its own.
            followed_for=streams.FOLLOW_S if body.stream else body.wait + streams.WAIT_MARGIN_S if body.wait else 0,
        )


# --- lists of runs and sessions -------------------------------------------------------------------------------
# The filters are read here once, for the API and for the dashboard's filter forms alike.

RUN_FILTERS = [
    OpenApiParameter("agent", str, description="an agent id"),
    OpenApiParameter("status", str, enum=[s.value for s in Run.Status]),
    OpenApiParameter("end_user", str, description="the end user's external id"),
    *TIME_FILTERS,
    OpenApiParameter("sandbox", bool, description="true: test-panel runs only; false: customers' runs only"),
    OpenApiParameter("session", str, description="a session id"),
]


empty_is_unset("runs_list")  # read with kagent.api.param_*


def run_filters(params: Mapping[str, str]) -> dict[str, Any]:
    """`GET /v1/runs`'s query parameters as `selectors.run_list`'s keyword arguments; 422 `invalid_parameter`."""
    return {
        "agent_id": param_text(params, "agent", max_length=40),
        "status": param_choice(params, "status", [s.value for s in Run.Status]),
        "end_user": param_text(params, "end_user"),
        "created_after": param_time(params, "created_after"),
        "created_before": param_time(params, "created_before"),
        "sandbox": param_bool(params, "sandbox"),
        "session_id": param_text(params, "session", max_length=40),
    }


class RunListCreateApi(RunCreateApi):
    """`/v1/runs`: `GET` here, `POST` as RunCreateApi has it (one route, so one view class; the create operation
    stays in its own class)."""

    @extend_schema(
        operation_id="runs_list",
        parameters=RUN_FILTERS,
        responses=list_of(RUN.ref),
        description="Newest first. A publishable key lists only the runs it created for the verified end user whose "
        "end_user_token it sends (none without one). A `store: false` run is "
        "rendered as its detail is, and its content deleted the same way once returned.",
    )
    def get(self, request: Request) -> Response:
        runs = selectors.run_list(
            project=self.project,
            key=self.api_key,
            end_user_token=end_user_token(request),
            **run_filters(request.query_params),
        )
        return Response(paginate(request, runs, lambda run: deliver(run, self.api_key)))
