"""Retention deleting an old event's deliveries and attempt log while the project deletes the endpoint they went to:
`endpoint_delete` deletes the attempts, then the deliveries; retention locks what it deletes in that order too, so
neither holds one while waiting for the other (a deadlock PostgreSQL would break by failing one, maybe the project's
own request)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import QuerySet
from django.utils import timezone

from hooks import services
from hooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent
from hooks.sweep import webhook_events_expire
from tests.hooks.test_retention import alices_endpoint, event
from tests.races import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_deleting_an_endpoint_while_retention_deletes_its_old_deliveries(alice: Any, monkeypatch) -> None:
    endpoint = alices_endpoint(alice)
    old = event(alice, endpoint, days_old=31)
    retention_holds = threading.Event()
    delete = QuerySet.delete

    def delete_later(queryset: QuerySet, *args: Any, **kwargs: Any) -> Any:
        if queryset.model is WebhookAttempt and threading.current_thread().name == "retention":
            retention_holds.set()  # what retention locks, it holds from here on
            time.sleep(0.5)  # the endpoint's deletion comes meanwhile
        return delete(queryset, *args, **kwargs)

    monkeypatch.setattr(QuerySet, "delete", delete_later)

    def expire() -> None:
        threading.current_thread().name = "retention"
        webhook_events_expire(before=timezone.now() - timedelta(days=30))

    def endpoint_delete() -> None:
        retention_holds.wait(5)
        services.endpoint_delete(endpoint=endpoint)

    errors = race(retention=expire, endpoint_delete=endpoint_delete)
    assert not errors, errors
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()
    assert not WebhookEvent.objects.filter(pk=old.pk).exists() and not WebhookDelivery.objects.exists()
    assert not WebhookAttempt.objects.exists()
