"""Each webhook event type is documented with its body (the OpenAPI document's `webhooks`), from the one list of
types (hooks/models.py EVENTS); the suite checks every body it sends against that schema (hooks/deliveries.py
`event_body`, with `Resource.check_renders` on), so a payload that drifts from its documentation fails the test that
sends it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils import timezone

from hooks.deliveries import event_body
from hooks.models import EVENT_TYPES, EVENTS, PING, WebhookEvent


def _doc(client: Any) -> dict[str, Any]:
    return json.loads(client.get("/v1/openapi.json").content)


def _resolve(doc: dict[str, Any], ref: str) -> dict[str, Any]:
    return doc["components"]["schemas"][ref.removeprefix("#/components/schemas/")]


def test_every_event_type_is_documented_with_the_object_it_carries(client: Any) -> None:
    doc = _doc(client)
    assert sorted(doc["webhooks"]) == sorted([*EVENT_TYPES, PING])
    for name, kind in EVENTS.items():
        body = doc["webhooks"][name]["post"]["requestBody"]["content"]["application/json"]["schema"]
        envelope = _resolve(doc, body["$ref"])
        assert envelope["properties"]["type"] == {"const": name}
        data = _resolve(doc, envelope["properties"]["data"]["$ref"])
        assert data["properties"]["object"] == {"const": kind.object}, name  # the object the event says it carries
    listed = _resolve(doc, "#/components/schemas/WebhookEvent")["oneOf"]
    assert len(listed) == len(EVENT_TYPES) + 1  # and the test event


@pytest.mark.django_db
def test_a_body_that_is_not_its_events_documented_object_fails_the_suite(alice: Any) -> None:
    event = WebhookEvent(
        project_id=alice.project.pk,
        type="ticket.created",
        object_id="run_x",
        data={"id": "run_x", "object": "run"},  # a run where a ticket is documented
        created_at=timezone.now(),
    )
    with pytest.raises(AssertionError, match="ticket.created webhook rendered outside its schema"):
        event_body(event)
