"""`/v1/secrets…`, `/v1/tool_signing_secret…`, `/v1/end_user_secret…`, `/v1/egress_events`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from kagent import secrets, selectors
from kagent.api import ProjectApi, paginate, paginate_numbered, param_choice, param_text, param_time
from kagent.inputs import Input
from kagent.models import EgressEvent, SigningSecret
from kagent.openapi import empty_is_unset, list_of
from kagent.resources import EGRESS_EVENT, SECRET, SIGNING_SECRET
from kagent.secrets import HOSTNAME_RE, MAX_HOSTS, MAX_VALUE


@dataclass(frozen=True)
class SecretWrite:
    value: str
    allowed_hosts: list[str]


# Messages never echo the value.
SECRET_WRITE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["value", "allowed_hosts"],
        "properties": {
            "value": {
                "type": "string",
                "writeOnly": True,
                "minLength": 1,
                "maxLength": MAX_VALUE,
                # linear: anchored, one class
                "pattern": "^[^\\x00-\\x1f\\x7f]+(?!\\n)$",
                "x-code": "invalid_secret_value",
                "x-message": "Give the secret a value.",
                "x-messages": {
                    "maxLength": f"A secret's value can be at most {MAX_VALUE} characters long.",
                    "pattern": "A secret's value can't hold line breaks or other control characters.",
                },
            },
            "allowed_hosts": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_HOSTS,
                "items": {"type": "string", "pattern": HOSTNAME_RE.pattern},
                "description": "the host names this secret may be sent to",
                "x-code": "invalid_allowed_hosts",
                "x-message": "Name at least one host this secret may be sent to, like api.example.com.",
                "x-messages": {
                    "maxItems": f"A secret can have at most {MAX_HOSTS} allowed hosts.",
                    "items": "Each allowed host is a lower-case host name like api.example.com (no scheme, port or "
                    "path).",
                },
            },
        },
    },
    SecretWrite,
)


class SecretListApi(ProjectApi):
    @extend_schema(operation_id="secrets_list", responses=list_of(SECRET.ref))
    def get(self, request: Request) -> Response:
        return Response(paginate(request, secrets.secret_list(project=self.project), SECRET.render))


class SecretDetailApi(ProjectApi):
    @extend_schema(operation_id="secrets_put", request=SECRET_WRITE.body, responses={200: SECRET.ref, 201: SECRET.ref})
    def put(self, request: Request, name: str) -> Response:
        body = SECRET_WRITE.parse(request.data)
        secret, created = secrets.secret_put(
            project=self.project, name=name, value=body.value, allowed_hosts=body.allowed_hosts
        )
        return Response(SECRET.render(secret), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(operation_id="secrets_retrieve", responses={200: SECRET.ref})
    def get(self, request: Request, name: str) -> Response:
        return Response(SECRET.render(secrets.secret_get(project=self.project, name=name)))

    @extend_schema(operation_id="secrets_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, name: str) -> Response:
        secrets.secret_delete(project=self.project, name=name)
        return Response({"object": "secret", "name": name, "deleted": True})


class _SigningSecretApi(ProjectApi):
    purpose: str = ""

    def _render(self, secret: str) -> Response:
        expiry = secrets.signing_secret_previous_expiry(project=self.project, purpose=self.purpose)
        return Response(SIGNING_SECRET.render((secret, expiry)))

    def _current(self) -> Response:
        secret, _ = secrets.signing_secret_current(project=self.project, purpose=self.purpose)
        return self._render(secret)

    def _rotate(self) -> Response:
        return self._render(secrets.signing_secret_rotate(project=self.project, purpose=self.purpose))


class ToolSigningSecretApi(_SigningSecretApi):
    purpose = SigningSecret.Purpose.TOOL_SIGNING

    @extend_schema(operation_id="tool_signing_secret_retrieve", responses={200: SIGNING_SECRET.ref})
    def get(self, request: Request) -> Response:
        return self._current()


class ToolSigningSecretRotateApi(_SigningSecretApi):
    purpose = SigningSecret.Purpose.TOOL_SIGNING

    @extend_schema(operation_id="tool_signing_secret_rotate", request=None, responses={200: SIGNING_SECRET.ref})
    def post(self, request: Request) -> Response:
        return self._rotate()


class EndUserSecretApi(_SigningSecretApi):
    purpose = SigningSecret.Purpose.END_USER

    @extend_schema(operation_id="end_user_secret_retrieve", responses={200: SIGNING_SECRET.ref})
    def get(self, request: Request) -> Response:
        return self._current()


class EndUserSecretRotateApi(_SigningSecretApi):
    purpose = SigningSecret.Purpose.END_USER

    @extend_schema(operation_id="end_user_secret_rotate", request=None, responses={200: SIGNING_SECRET.ref})
    def post(self, request: Request) -> Response:
        return self._rotate()


# --- the egress log ---------------------------------------------------------------------------------------------

EGRESS_PURPOSES = ("http_tool", "knowledge", "webhook", "model", "mcp")


empty_is_unset("egress_events_list")  # read with kagent.api.param_*


def egress_filters(params: Mapping[str, str]) -> dict[str, Any]:
    """`GET /v1/egress_events`'s query parameters as `selectors.egress_event_list`'s keyword arguments."""
    return {
        "decision": param_choice(params, "decision", [d.value for d in EgressEvent.Decision]),
        "purpose": param_choice(params, "purpose", EGRESS_PURPOSES),
        "host": param_text(params, "host"),
        "created_after": param_time(params, "created_after"),
        "created_before": param_time(params, "created_before"),
    }


class EgressEventListApi(ProjectApi):
    @extend_schema(
        operation_id="egress_events_list",
        parameters=[
            OpenApiParameter("decision", str, enum=[d.value for d in EgressEvent.Decision]),
            OpenApiParameter("purpose", str, enum=list(EGRESS_PURPOSES)),
            OpenApiParameter("host", str),
            OpenApiParameter("created_after", str, description="Unix seconds, or an ISO 8601 date / date-time (UTC)"),
            OpenApiParameter("created_before", str, description="Unix seconds, or an ISO 8601 date / date-time (UTC)"),
        ],
        responses=list_of(EGRESS_EVENT.ref),
    )
    def get(self, request: Request) -> Response:
        events = selectors.egress_event_list(project=self.project, **egress_filters(request.query_params))
        return Response(paginate_numbered(request, events, EGRESS_EVENT.render, prefix="egress"))
