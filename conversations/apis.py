"""The conversation API: `/v1/sessions` (create, list, read, hand back or close), its messages (the team's and the
customer's, not a run's) and its event stream. A run on a session is the runs app's (`POST /v1/runs`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.http.response import HttpResponseBase
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import selectors, services, session_events
from conversations.identity import EndUserClaim
from conversations.resources import MESSAGE, SESSION
from kagent import throttle
from kagent.api import ProjectApi, paginate, param_bool, param_choice, param_text, param_time
from kagent.clients import client_address
from kagent.errors import ApiError
from kagent.inputs import Input
from kagent.models import ApiKey
from kagent.openapi import empty_is_unset, list_of
from kagent.streams import EventStreamApi

# --- shared body fields -------------------------------------------------------------------------------------------

END_USER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["external_id"],
    "properties": {"external_id": {"type": "string"}, "traits": {"type": ["object", "null"]}},
    "description": "A verified end user, named by the business's server (secret keys only).",
    "x-code": "invalid_end_user",
    "x-message": 'end_user is {"external_id": …, "traits": {…}}.',
}
END_USER_TOKEN = {
    "type": "string",
    "minLength": 1,
    "maxLength": 8192,
    "description": "A JWT (HS256) signed with the project's end-user secret: `sub` = external id, optional "
    "`traits`, required `exp`.",
    "x-code": "invalid_end_user_token",
    "x-message": "end_user_token is a JWT string.",
}
METADATA = {
    "type": "object",
    "maxProperties": 50,
    "propertyNames": {"minLength": 1, "maxLength": 64},
    "additionalProperties": {"type": ["string", "number", "boolean", "null"], "maxLength": 500},
    "default": {},
    "x-code": "invalid_metadata",
    "x-message": "metadata is an object with at most 50 keys.",
    "x-messages": {
        "propertyNames": "metadata keys are strings of 1 to 64 characters.",
        "additionalProperties/type": "metadata values are strings, numbers, booleans or null.",
        "additionalProperties/maxLength": "metadata values are at most 500 characters.",
    },
}


TOKEN_HEADER = "X-End-User-Token"


def end_user_token(request: Request) -> str | None:
    """A verified end user's token on a read or an answer with a publishable key: the `X-End-User-Token` header,
    else the `end_user_token` query parameter (a session or run of a verified end user is a 404 to a publishable
    key without it)."""
    token = request.headers.get(TOKEN_HEADER) or request.query_params.get("end_user_token")
    return token.strip() if isinstance(token, str) and token.strip() else None


def end_user_claim(value: dict[str, Any] | None) -> EndUserClaim | None:
    if value is None:
        return None
    return EndUserClaim(external_id=value["external_id"], traits=value.get("traits"))


# --- sessions -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionCreate:
    agent: str
    end_user: dict[str, Any] | None
    end_user_token: str | None
    metadata: dict[str, Any]


SESSION_CREATE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["agent"],
        "properties": {
            "agent": {"type": "string", "x-message": "agent is required: the id of the agent to talk to."},
            "end_user": END_USER,
            "end_user_token": END_USER_TOKEN,
            "metadata": METADATA,
        },
    },
    SessionCreate,
)


class SessionCreateApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(operation_id="sessions_create", request=SESSION_CREATE.body, responses={201: SESSION.ref})
    def post(self, request: Request) -> Response:
        body = SESSION_CREATE.parse(request.data)
        session = services.session_create(
            project=self.project,
            api_key=self.api_key,
            agent_id=body.agent,
            end_user=end_user_claim(body.end_user),
            end_user_token=body.end_user_token,
            metadata=body.metadata,
        )
        return Response(SESSION.render(session), status=status.HTTP_201_CREATED)


def secret_only(key: ApiKey, what: str) -> None:
    if not key.is_secret:
        raise ApiError("publishable_key_not_allowed", f"{what} with a secret key, on your server.", status=403)


@dataclass(frozen=True)
class SessionUpdate:
    status: str


SESSION_UPDATE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["status"],
        "properties": {
            "status": {
                "enum": ["open", "closed"],
                "description": "open: hand the conversation back to the agent; closed: close it",
                "x-message": 'status is "open" (hand the conversation back to the agent) or "closed".',
            }
        },
    },
    SessionUpdate,
)


class SessionDetailApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(operation_id="sessions_retrieve", responses={200: SESSION.ref})
    def get(self, request: Request, session_id: str) -> Response:
        session = selectors.session_get(
            project=self.project, session_id=session_id, key=self.api_key, end_user_token=end_user_token(request)
        )
        return Response(SESSION.render(session))

    @extend_schema(
        operation_id="sessions_update",
        request=SESSION_UPDATE.body,
        responses={200: SESSION.ref},
        description="The team hands the conversation back to the agent (`open`: its open handoffs close, the next "
        "run's history holds what the customer and the team said meanwhile) or closes it (`closed`). Secret keys "
        "only.",
    )
    def patch(self, request: Request, session_id: str) -> Response:
        # Looked up first, as every read: another's conversation is a 404 to any key, whatever the body.
        session = selectors.session_get(
            project=self.project, session_id=session_id, key=self.api_key, end_user_token=end_user_token(request)
        )
        secret_only(self.api_key, "Hand a conversation back or close it")
        body = SESSION_UPDATE.parse(request.data)
        return Response(SESSION.render(services.session_update(session=session, status=body.status)))


@dataclass(frozen=True)
class MessageCreate:
    role: str
    content: str
    author: str | None


MESSAGE_CREATE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["role", "content"],
        "properties": {
            "role": {
                "enum": ["user", "team"],
                "description": "team: a person of the business (secret key); user: the customer (secret key, or the "
                "publishable key with the session's own end user's token)",
                "x-message": 'role is "team" (a person of your team) or "user" (the customer).',
            },
            "content": {
                "type": "string",
                "description": f"at most {services.MESSAGE_MAX} characters (422 `input_too_large`)",
                "x-message": "content is the message's text.",
            },
            "author": {
                "type": ["string", "null"],
                "maxLength": 100,
                "description": "a team message's writer as the customer sees it (a first name, the team's name)",
                "x-message": "author is a name of at most 100 characters.",
            },
        },
    },
    MessageCreate,
)


class SessionMessagesApi(ProjectApi):
    publishable_allowed = True

    @extend_schema(operation_id="sessions_messages_list", responses=list_of(MESSAGE.ref))
    def get(self, request: Request, session_id: str) -> Response:
        session = selectors.session_get(
            project=self.project, session_id=session_id, key=self.api_key, end_user_token=end_user_token(request)
        )
        return Response(paginate(request, selectors.session_messages(session=session), MESSAGE.render))

    @extend_schema(
        operation_id="sessions_messages_create",
        request=MESSAGE_CREATE.body,
        responses={201: MESSAGE.ref},
        description="Writes into the conversation (a live handoff): `team`, a person of the business (secret key; a "
        "conversation the agent holds goes to the team, its open run superseded); `user`, the customer (never starts "
        "a run: while the team holds the conversation, its messages are for the team). 409 `session_handed_off` "
        "answers `POST /v1/runs` on a conversation the team holds.",
    )
    def post(self, request: Request, session_id: str) -> Response:
        # Looked up first, as every read: another's conversation is a 404 to any key, whatever the body.
        session = selectors.session_get(
            project=self.project, session_id=session_id, key=self.api_key, end_user_token=end_user_token(request)
        )
        body = MESSAGE_CREATE.parse(request.data)
        if body.role == "team":
            secret_only(self.api_key, "The team writes into a conversation")
        else:
            throttle.customer_message(self.api_key, address=client_address(request))
        message = services.session_message_create(
            session=session, role=body.role, content=body.content, author=body.author or ""
        )
        return Response(MESSAGE.render(message), status=status.HTTP_201_CREATED)


SESSION_EVENTS_DESCRIPTION = (
    "Server-Sent Events of the conversation: `event:` session.message.created (`data:` the message: the customer's, "
    "the agent's, the team's) and session.updated (`data:` the session, e.g. handed to the team or back). `id:` "
    "resume after it with Last-Event-ID. A comment every 15 s keeps it open; it ends after a few minutes (an "
    "EventSource reconnects by itself and resumes). The same credentials as the session's messages."
)


class SessionEventsApi(EventStreamApi):
    @extend_schema(
        operation_id="sessions_events",
        parameters=EventStreamApi.PARAMETERS,
        responses={(200, "text/event-stream"): OpenApiResponse(description=SESSION_EVENTS_DESCRIPTION)},
        description=SESSION_EVENTS_DESCRIPTION,
    )
    def get(self, request: Request, session_id: str) -> HttpResponseBase:
        session = selectors.session_get(
            project=self.project, session_id=session_id, key=self.api_key, end_user_token=end_user_token(request)
        )
        after, places = self.opened(request)
        return session_events.session_event_stream(session.pk, places, after=after)


TIME_FILTERS = [
    OpenApiParameter("created_after", str, description="Unix seconds, or an ISO 8601 date / date-time (UTC)"),
    OpenApiParameter("created_before", str, description="Unix seconds, or an ISO 8601 date / date-time (UTC)"),
]
SESSION_FILTERS = [
    OpenApiParameter("agent", str, description="an agent id"),
    OpenApiParameter(
        "status",
        str,
        enum=list(selectors.SESSION_STATUSES),
        description="handed_off while one of its handoffs is open; closed once the team closed its last handoff",
    ),
    OpenApiParameter("flagged", bool),
    OpenApiParameter("end_user", str, description="the end user's external id"),
    *TIME_FILTERS,
    OpenApiParameter("include_tests", bool, description="include test-panel sessions (off by default)"),
]


empty_is_unset("sessions_list")  # read with kagent.api.param_*


def session_filters(params: Mapping[str, str]) -> dict[str, Any]:
    """`GET /v1/sessions`'s query parameters as `selectors.session_list`'s keyword arguments."""
    return {
        "agent_id": param_text(params, "agent", max_length=40),
        "status": param_choice(params, "status", selectors.SESSION_STATUSES),
        "flagged": param_bool(params, "flagged"),
        "end_user": param_text(params, "end_user"),
        "created_after": param_time(params, "created_after"),
        "created_before": param_time(params, "created_before"),
        "include_tests": bool(param_bool(params, "include_tests")),
    }


class SessionListCreateApi(SessionCreateApi):
    """`/v1/sessions`: `GET` here, `POST` as SessionCreateApi has it."""

    @extend_schema(
        operation_id="sessions_list",
        parameters=SESSION_FILTERS,
        responses=list_of(SESSION.ref),
        description="Newest first. A publishable key lists only the sessions it created for the verified end user "
        "whose end_user_token it sends (none without one).",
    )
    def get(self, request: Request) -> Response:
        sessions = selectors.session_list(
            project=self.project,
            key=self.api_key,
            end_user_token=end_user_token(request),
            **session_filters(request.query_params),
        )
        return Response(paginate(request, sessions, SESSION.render))
