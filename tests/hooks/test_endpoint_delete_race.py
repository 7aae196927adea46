"""An endpoint deleted while an event's dispatch is making its deliveries: a delivery's keys are checked in its INSERT
(runs/migrations/0010), so the dispatch holds the endpoint's row FOR KEY SHARE until it commits, and the deletion,
which read the endpoint's deliveries before that one was made, waits for it and then finds it (hooks/services.py
`endpoint_delete` reads them again). `deferred`: with the keys deferred again, as before 0010."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from hooks import services
from hooks.deliveries import event_dispatch
from hooks.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from tests.races import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_deleting_an_endpoint_while_an_event_is_dispatched(alice: Any, deferred: bool, monkeypatch) -> None:
    endpoint = WebhookEndpoint.objects.create(
        project=alice.project, url="https://example.com/h", event_types=["ticket.created"], secret_ciphertext=b"x"
    )
    event = WebhookEvent.objects.create(project=alice.project, type="ticket.created", object_id="t", data={"a": 1})
    inserted = threading.Event()
    manager = WebhookDelivery.objects
    bulk_create = manager.bulk_create

    def bulk_create_then_wait(*args: Any, **kwargs: Any) -> Any:
        made = bulk_create(*args, **kwargs)
        inserted.set()  # the dispatch's deliveries are written, not committed
        time.sleep(0.5)  # the endpoint's deletion comes meanwhile
        return made

    monkeypatch.setattr(manager, "bulk_create", bulk_create_then_wait)

    def delete() -> None:
        inserted.wait(5)
        services.endpoint_delete(endpoint=endpoint)

    errors = race(dispatch=lambda: event_dispatch(event_id=event.pk), endpoint_delete=delete)
    # Before 0010 the dispatch failed instead (its delivery's key checked at its COMMIT, after the deletion): the
    # sweep dispatches the event again, to the endpoints that are left.
    assert "endpoint_delete" not in errors, errors  # the project's own request
    assert set(errors) <= ({"dispatch"} if deferred else set()), errors
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()
    assert not WebhookDelivery.objects.filter(endpoint_id=endpoint.pk).exists()
