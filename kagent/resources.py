"""How the project's secrets and signing secrets look in the API (rendered and in the OpenAPI document)."""

from __future__ import annotations

from kagent.models import Secret
from kagent.rendering import Const, Field, Resource, Timestamp
from kagent.secrets import SECRET_NAME_RE

SECRET: Resource[Secret] = Resource(
    "Secret",
    {
        "object": Const("secret"),
        "name": Field({"type": "string", "pattern": SECRET_NAME_RE.pattern}, "name"),
        "allowed_hosts": Field({"type": "array", "items": {"type": "string"}}, "allowed_hosts"),
        "last_four": Field(
            {"type": "string", "description": "empty for values shorter than 12 characters"}, "last_four"
        ),
        "updated_at": Timestamp("updated_at"),
    },
    description="Write-only: the value is never returned.",
)

# Rendered from (secret, expiry of the previous one): the secret itself is shown on purpose, to the project's
# secret key or its dashboard only.
SIGNING_SECRET: Resource[tuple[str, int | None]] = Resource(
    "SigningSecret",
    {
        "secret": Field({"type": "string", "example": "whsec_…"}, lambda pair: pair[0]),
        "previous_secret_expires_at": Field(
            {"type": ["integer", "null"], "description": "Unix seconds; until then the previous secret signs too"},
            lambda pair: pair[1],
        ),
    },
)
