"""Helpers for the webhook tests: an endpoint of alice's pointed at the real HTTPS receiver on loopback (the
`upstream` fixture, which verifies every request's Standard Webhooks signature with the secrets it is given), and
`pump`, which does here, in order, what the workers do: dispatch the recorded events, then make every due attempt."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.utils import timezone

from hooks.deliveries import delivery_attempt, event_dispatch
from hooks.models import WebhookDelivery, WebhookEvent
from llm import retry
from tests.runs.conftest import Harness

EVERY_TYPE = [
    "run.completed",
    "run.failed",
    "run.requires_action",
    "run.cancelled",
    "handoff.created",
    "handoff.closed",
    "ticket.created",
    "ticket.updated",
    "conversation.flagged",
]


@dataclass
class Endpoint:
    id: str
    secret: str
    url: str
    body: dict[str, Any]


def create_endpoint(client: Any, upstream: Any, *, name: str = "hook", types: list[str] | None = None, **kw: Any):
    url = f"https://tools.test:8443{upstream.respond(name, json_body={'received': True})}"
    response = client.post(
        "/v1/webhook_endpoints", {"url": url, "event_types": types or EVERY_TYPE, **kw}, format="json"
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    upstream.secrets = [body["secret"]]  # the receiver verifies with the endpoint's secret
    return Endpoint(body["id"], body["secret"], url, body)


def pump(rounds: int = 10) -> None:
    """Dispatch what was recorded and attempt what is due, until nothing is left to do now."""
    for _ in range(rounds):
        events = list(WebhookEvent.objects.filter(dispatched_at__isnull=True).values_list("pk", flat=True))
        for event_id in events:
            event_dispatch(event_id=event_id)
        due = list(
            WebhookDelivery.objects.filter(
                status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=timezone.now()
            ).values_list("pk", flat=True)
        )
        for delivery_id in due:
            delivery_attempt(delivery_id=delivery_id)
        if not events and not due:
            return


def received(upstream: Any) -> list[tuple[Any, dict[str, Any]]]:
    """Every request the receiver got, with its JSON body."""
    return [(r, json.loads(r.body)) for r in upstream.received]


@pytest.fixture
def instant_retries(settings: Any) -> Any:
    settings.KAGENT_WEBHOOK_RETRY_SECONDS = [0.0, 0.0]
    return settings


@pytest.fixture
def hk(alice: Any, fake_llm: Any, upstream: Any, egress_settings: Any, monkeypatch: Any) -> Harness:
    """Alice's runs, driven by the engine in this process (as tests/runs does), and the receiver reachable."""
    monkeypatch.setattr(retry, "SLEEP", lambda seconds: None)
    return Harness(alice, fake_llm)
