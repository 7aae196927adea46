"""How the project's secrets, signing secrets and egress log look in the API (rendered and in the OpenAPI document)."""

from __future__ import annotations

from kagent.egress import REFUSAL_CODES, shown_code
from kagent.models import EgressEvent, Secret
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


def address_shown(code: str, address: str) -> str | None:
    """The address a call connected to, for the tenant's eyes: only for calls the deny list let through. A refused
    address (what a name resolved to inside our network, say) is never shown back."""
    return address or None if code not in REFUSAL_CODES else None


EGRESS_EVENT: Resource[EgressEvent] = Resource(
    "EgressEvent",
    {
        "id": Field({"type": "string", "example": "egress_1234"}, lambda event: f"egress_{event.pk}"),
        "object": Const("egress_event"),
        "purpose": Field({"type": "string", "description": "http_tool, knowledge, webhook, model, mcp"}, "purpose"),
        "decision": Field({"enum": ["allowed", "refused"]}, "decision"),
        "code": Field(
            {"type": ["string", "null"], "description": "why it was refused, or how the call failed"},
            lambda event: shown_code(event.code) or None,
        ),
        "method": Field({"type": "string"}, "method"),
        "host": Field({"type": "string"}, "host"),
        "port": Field({"type": ["integer", "null"]}, "port"),
        "path": Field({"type": "string", "description": "without the query string"}, "path"),
        "resolved_address": Field(
            {"type": ["string", "null"], "description": "the address connected to; null for refusals"},
            lambda event: address_shown(event.code, event.resolved_address),
        ),
        "status": Field({"type": ["integer", "null"], "description": "the upstream's HTTP status"}, "status"),
        "bytes_received": Field({"type": "integer"}, "bytes_received"),
        "duration_ms": Field({"type": "integer"}, "duration_ms"),
        "created_at": Timestamp("created_at"),
    },
    description="One attempt of the hardened outbound client: a call made, or a call refused. Never holds query "
    "strings, headers, bodies or secret values.",
)
