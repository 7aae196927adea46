"""Webhooks delivered by a real Celery worker: retried with backoff until the receiver answers, and a worker SIGKILLed
mid-delivery — the event is delivered by another worker after the sweep, with the same webhook-id, never lost."""

from __future__ import annotations

import time

import pytest

from desk.models import Ticket
from hooks.models import WebhookDelivery
from hooks.sweep import hooks_sweep
from tests.conftest import make_tenant, wait_for
from tests.hooks.conftest import create_endpoint, received

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def worker_env(settings, **extra):
    return {
        "KAGENT_EGRESS_ALLOW_NETWORKS": " ".join(settings.KAGENT_EGRESS_ALLOW_NETWORKS),
        "KAGENT_EGRESS_CA_BUNDLE": settings.KAGENT_EGRESS_CA_BUNDLE,
        "KAGENT_EGRESS_RESOLVE": settings.KAGENT_EGRESS_RESOLVE,
        **extra,
    }


def close_a_ticket(tenant):
    ticket = Ticket.objects.create(
        project=tenant.project, number=1, title="Damaged box", description="Crushed", rate_key="eu:customer"
    )
    response = tenant.client().patch(f"/v1/tickets/{ticket.pk}", {"status": "closed"}, format="json")
    assert response.status_code == 200


def succeeded():
    return WebhookDelivery.objects.filter(status=WebhookDelivery.Status.SUCCEEDED).first()


def test_a_worker_retries_until_the_receiver_answers(start_worker, upstream, egress_settings, settings):
    tenant = make_tenant("alice")
    endpoint = create_endpoint(tenant.client(), upstream, types=["ticket.updated"])
    upstream.canned["hook"].statuses = [500, 502]
    start_worker(worker_env(settings, KAGENT_WEBHOOK_RETRY_SECONDS="0.2,0.2,0.2"))
    close_a_ticket(tenant)

    delivery = wait_for(succeeded, timeout=40, message="the delivery to succeed")
    assert delivery.attempts == 3
    got = received(upstream)
    assert [body["type"] for _, body in got] == ["ticket.updated"] * 3
    assert {request.headers["webhook-id"] for request, _ in got} == {got[0][1]["id"]}
    assert all(request.signature_valid == [True] for request, _ in got)
    assert endpoint.secret not in str([request.headers for request, _ in got])


def test_a_worker_killed_mid_delivery_loses_nothing(start_worker, upstream, egress_settings, settings):
    tenant = make_tenant("alice")
    create_endpoint(tenant.client(), upstream, types=["ticket.updated"])
    upstream.canned["hook"].delays = [8.0]  # the first attempt is still waiting for its answer when the worker dies
    env = worker_env(settings, KAGENT_WEBHOOK_LEASE_SECONDS="2")
    worker = start_worker(env)
    close_a_ticket(tenant)

    wait_for(lambda: len(upstream.received) == 1, timeout=30, message="the first attempt to arrive")
    worker.kill()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "pending" and delivery.attempts == 0 and delivery.leased_until is not None

    time.sleep(2.5)  # the dead worker's lease runs out
    start_worker(env)
    assert hooks_sweep()["queued"] == 1
    delivery = wait_for(succeeded, timeout=40, message="the delivery to succeed")
    assert delivery.attempts == 1  # the killed attempt never got an answer to log
    first, second = upstream.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == delivery.event_id
    assert first.body == second.body and second.signature_valid == [True]
