"""`/v1/secrets…`, `/v1/tool_signing_secret…`, `/v1/end_user_secret…`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from kagent import secrets
from kagent.api import ProjectApi, paginate, request_object, unix
from kagent.errors import Unprocessable
from kagent.models import Secret, SigningSecret
from kagent.openapi import NULLABLE_TIMESTAMP, TIMESTAMP, component, json_body, list_of

SECRET_SCHEMA = component(
    "Secret",
    {
        "type": "object",
        "description": "Write-only: the value is never returned.",
        "properties": {
            "object": {"const": "secret"},
            "name": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]{0,63}$"},
            "allowed_hosts": {"type": "array", "items": {"type": "string"}},
            "last_four": {"type": "string", "description": "empty for values shorter than 12 characters"},
            "updated_at": TIMESTAMP,
        },
    },
)
SECRET_WRITE = json_body(
    {
        "type": "object",
        "required": ["value", "allowed_hosts"],
        "properties": {
            "value": {"type": "string", "writeOnly": True, "maxLength": 8192},
            "allowed_hosts": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 20},
        },
    }
)
SIGNING_SECRET_SCHEMA = component(
    "SigningSecret",
    {
        "type": "object",
        "properties": {
            "secret": {"type": "string", "example": "whsec_…"},
            "previous_secret_expires_at": NULLABLE_TIMESTAMP,
        },
    },
)


def render_secret(secret: Secret) -> dict[str, Any]:
    return {
        "object": "secret",
        "name": secret.name,
        "allowed_hosts": secret.allowed_hosts,
        "last_four": secret.last_four,
        "updated_at": unix(secret.updated_at),
    }


class SecretListApi(ProjectApi):
    @extend_schema(operation_id="secrets_list", responses=list_of(SECRET_SCHEMA))
    def get(self, request: Request) -> Response:
        return Response(paginate(request, secrets.secret_list(project=self.project), render_secret))


class SecretDetailApi(ProjectApi):
    @extend_schema(operation_id="secrets_put", request=SECRET_WRITE, responses={200: SECRET_SCHEMA, 201: SECRET_SCHEMA})
    def put(self, request: Request, name: str) -> Response:
        body = request_object(request)
        unknown = sorted(set(body) - {"value", "allowed_hosts"})
        if unknown:
            raise Unprocessable("invalid_request", f"Unknown field(s): {', '.join(unknown)[:200]}.")
        secret, created = secrets.secret_put(
            project=self.project, name=name, value=body.get("value"), allowed_hosts=body.get("allowed_hosts")
        )
        return Response(render_secret(secret), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(operation_id="secrets_retrieve", responses={200: SECRET_SCHEMA})
    def get(self, request: Request, name: str) -> Response:
        return Response(render_secret(secrets.secret_get(project=self.project, name=name)))

    @extend_schema(operation_id="secrets_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, name: str) -> Response:
        secrets.secret_delete(project=self.project, name=name)
        return Response({"object": "secret", "name": name, "deleted": True})


class _SigningSecretApi(ProjectApi):
    purpose: str = ""

    def _render(self, secret: str) -> dict[str, Any]:
        expiry = secrets.signing_secret_previous_expiry(project=self.project, purpose=self.purpose)
        return {"secret": secret, "previous_secret_expires_at": expiry}


class ToolSigningSecretApi(_SigningSecretApi):
    purpose = SigningSecret.Purpose.TOOL_SIGNING

    @extend_schema(operation_id="tool_signing_secret_retrieve", responses={200: SIGNING_SECRET_SCHEMA})
    def get(self, request: Request) -> Response:
        secret, _ = secrets.signing_secret_current(project=self.project, purpose=self.purpose)
        return Response(self._render(secret))


class ToolSigningSecretRotateApi(_SigningSecretApi):
    purpose = SigningSecret.Purpose.TOOL_SIGNING

    @extend_schema(operation_id="tool_signing_secret_rotate", request=None, responses={200: SIGNING_SECRET_SCHEMA})
    def post(self, request: Request) -> Response:
        return Response(self._render(secrets.signing_secret_rotate(project=self.project, purpose=self.purpose)))


class EndUserSecretApi(_SigningSecretApi):
    purpose = SigningSecret.Purpose.END_USER

    @extend_schema(operation_id="end_user_secret_retrieve", responses={200: SIGNING_SECRET_SCHEMA})
    def get(self, request: Request) -> Response:
        secret, _ = secrets.signing_secret_current(project=self.project, purpose=self.purpose)
        return Response(self._render(secret))


class EndUserSecretRotateApi(_SigningSecretApi):
    purpose = SigningSecret.Purpose.END_USER

    @extend_schema(operation_id="end_user_secret_rotate", request=None, responses={200: SIGNING_SECRET_SCHEMA})
    def post(self, request: Request) -> Response:
        return Response(self._render(secrets.signing_secret_rotate(project=self.project, purpose=self.purpose)))
