"""How webhook endpoints, their deliveries and the delivery log look in the API (and the OpenAPI document), and
each event type's body (`EVENT_SCHEMAS`, documented under the document's `webhooks`)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from jsonschema import Draft202012Validator

from hooks.models import EVENT_TYPES, EVENTS, PING, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from kagent.openapi import component, webhook
from kagent.rendering import Const, Field, Resource, Timestamp, check_rendered, unix, validator

_ID = {"type": "string"}

_ENDPOINT_FIELDS = {
    "id": Field({"type": "string", "example": "we_01j…"}, "pk"),
    "object": Const("webhook_endpoint"),
    "url": Field({"type": "string"}, "url"),
    "description": Field({"type": "string"}, "description"),
    "event_types": Field({"type": "array", "items": {"enum": list(EVENT_TYPES)}}, "event_types"),
    "enabled": Field({"type": "boolean"}, "enabled"),
    "disabled_reason": Field(
        {"type": ["string", "null"], "description": "why the endpoint is disabled (null while enabled)"},
        lambda endpoint: (endpoint.disabled_reason or "Disabled.") if not endpoint.enabled else None,
    ),
    "disabled_at": Field(
        {"type": ["integer", "null"], "description": "Unix seconds"},
        lambda endpoint: unix(endpoint.disabled_at) if not endpoint.enabled else None,
    ),
    "failing_since": Timestamp("failing_since", nullable=True),
    "last_success_at": Timestamp("last_success_at", nullable=True),
    "previous_secret_expires_at": Field(
        {
            "type": ["integer", "null"],
            "description": "after a rotation, until when the previous secret signs too (Unix seconds)",
        },
        lambda endpoint: (
            unix(endpoint.previous_secret_expires_at)
            if endpoint.previous_secret_expires_at and endpoint.previous_secret_expires_at > timezone.now()
            else None
        ),
    ),
    "created_at": Timestamp("created_at"),
}

WEBHOOK_ENDPOINT: Resource[WebhookEndpoint] = Resource("WebhookEndpoint", _ENDPOINT_FIELDS)


def with_secret(endpoint: WebhookEndpoint, secret: str) -> dict[str, Any]:
    """The endpoint with its new secret: on creation and on rotation only."""
    return WEBHOOK_ENDPOINT_WITH_SECRET.render(_WithSecret(endpoint, secret))


class _WithSecret:
    def __init__(self, endpoint: WebhookEndpoint, secret: str) -> None:
        self.endpoint, self.secret = endpoint, secret

    def __getattr__(self, name: str) -> Any:
        return getattr(self.endpoint, name)


WEBHOOK_ENDPOINT_WITH_SECRET: Resource[Any] = Resource(
    "WebhookEndpointWithSecret",
    {
        **_ENDPOINT_FIELDS,
        "secret": Field(
            {
                "type": "string",
                "description": "whsec_…: verify the webhook-signature header with it (any Standard Webhooks "
                "library). Shown only now.",
            },
            "secret",
        ),
    },
)


def _event_schema(event_type: str, payload: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"{event_type}: what an endpoint receives (the POST body), signed with Standard Webhooks "
        "headers; webhook-id is the event's id on every attempt and redelivery.",
        "required": ["id", "type", "created_at", "data"],
        "properties": {
            "id": {"type": "string", "example": "evt_01j…"},
            "type": {"const": event_type},
            "created_at": {"type": "integer", "description": "Unix seconds"},
            "data": {
                "$ref": f"#/components/schemas/{payload}",
                "description": f"the {payload} as the API renders it when the event happened (a store: false run's "
                "content is left empty)",
            },
        },
    }


# Each event type's body, from the one list (hooks/models.py EVENTS), and the test event a person sends from the
# dashboard (`ping`, which nobody subscribes to): a component and a webhook of the document each.
PING_DATA = component(
    "WebhookPing",
    {
        "type": "object",
        "required": ["endpoint", "message"],
        "properties": {"endpoint": {"type": "string"}, "message": {"type": "string"}},
    },
)
EVENT_SCHEMAS = {
    **{name: _event_schema(name, kind.schema) for name, kind in EVENTS.items()},
    PING: _event_schema(PING, "WebhookPing"),
}
for _name, _schema in EVENT_SCHEMAS.items():
    webhook(_name, component(f"WebhookEvent.{_name}", _schema), _schema["description"])
WEBHOOK_EVENT_SCHEMA = component(
    "WebhookEvent", {"oneOf": [{"$ref": f"#/components/schemas/WebhookEvent.{name}"} for name in EVENT_SCHEMAS]}
)
_EVENT_CHECKERS: dict[str, Draft202012Validator] = {}


def check_event_body(payload: dict[str, Any]) -> None:
    """The tests' check (`Resource.check_renders`) of a webhook body against its event type's documented schema."""
    event_type = payload["type"]
    if event_type not in _EVENT_CHECKERS:
        _EVENT_CHECKERS[event_type] = validator(EVENT_SCHEMAS[event_type])
    check_rendered(_EVENT_CHECKERS[event_type], f"the {event_type} webhook", payload)


def _attempt(attempt: WebhookAttempt) -> dict[str, Any]:
    return {
        "number": attempt.number,
        "at": unix(attempt.started_at),
        "manual": attempt.manual,
        "outcome": attempt.outcome,
        "status_code": attempt.status_code,
        "duration_ms": attempt.duration_ms,
        "error_code": attempt.error_code or None,
        "response_excerpt": attempt.response_excerpt,
        "note": attempt.note or None,
    }


def _shown(delivery: WebhookDelivery) -> list[WebhookAttempt]:
    if hasattr(delivery, "attempts_shown"):  # prefetched by the selectors
        return list(delivery.attempts_shown)
    return list(delivery.attempt_log.order_by("-number")[:20])


_ATTEMPT_SCHEMA = {
    "type": "object",
    "required": [
        "number",
        "at",
        "manual",
        "outcome",
        "status_code",
        "duration_ms",
        "error_code",
        "response_excerpt",
        "note",
    ],
    "properties": {
        "number": {"type": "integer"},
        "at": {"type": "integer", "description": "Unix seconds"},
        "manual": {"type": "boolean", "description": "a redelivery asked for by the project"},
        "outcome": {"enum": [o.value for o in WebhookAttempt.Outcome]},
        "status_code": {"type": ["integer", "null"], "description": "the endpoint's HTTP status; null: no answer"},
        "duration_ms": {"type": "integer"},
        "error_code": {
            "type": ["string", "null"],
            "description": "http_status (a non-2xx answer), timeout, connect_failed, tls_failed, dns_failed, "
            "address_not_allowed, url_not_allowed, redirect_not_followed, upstream_failed",
        },
        "response_excerpt": {"type": "string", "description": "the start of the answer's body, secrets masked"},
        "note": {"type": ["string", "null"], "description": "what followed: the endpoint disabled after it, and why"},
    },
}

WEBHOOK_DELIVERY: Resource[WebhookDelivery] = Resource(
    "WebhookDelivery",
    {
        "id": Field({"type": "string", "example": "whd_01j…"}, "pk"),
        "object": Const("webhook_delivery"),
        "endpoint": Field(_ID, "endpoint_id"),
        "event": Field(
            {
                "type": "object",
                "required": ["id", "type", "created_at"],
                "properties": {"id": _ID, "type": {"enum": list(EVENT_TYPES)}, "created_at": {"type": "integer"}},
            },
            lambda d: {"id": d.event_id, "type": d.event.type, "created_at": unix(d.event.created_at)},
        ),
        "status": Field({"enum": [s.value for s in WebhookDelivery.Status]}, "status"),
        "attempts": Field({"type": "integer"}, "attempts"),
        "next_attempt_at": Field(
            {"type": ["integer", "null"], "description": "pending: when the next attempt is due (Unix seconds)"},
            lambda d: unix(d.next_attempt_at) if d.status == WebhookDelivery.Status.PENDING else None,
        ),
        "last_status_code": Field({"type": ["integer", "null"]}, "last_status_code"),
        "last_error_code": Field({"type": ["string", "null"]}, lambda d: d.last_error_code or None),
        "log": Field(
            {"type": "array", "items": _ATTEMPT_SCHEMA, "description": "the latest 20 attempts, newest first"},
            lambda d: [_attempt(a) for a in _shown(d)],
        ),
        "created_at": Timestamp("created_at"),
        "completed_at": Timestamp("completed_at", nullable=True),
    },
)
