"""Retention: webhook events done with (dispatched, no delivery pending) and older than KAGENT_WEBHOOK_RETENTION_DAYS
go with their deliveries and attempt logs; egress log rows older than KAGENT_EGRESS_RETENTION_DAYS go; everything
else stays. Run as beat runs them (`hooks.expire`, `kagent.egress_expire`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from hooks.deliveries import delivery_redeliver
from hooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent
from hooks.services import endpoint_create
from hooks.sweep import webhook_events_expire
from hooks.tasks import expire
from kagent.errors import NotFound
from kagent.models import EgressEvent, Project
from kagent.services import egress_events_expire
from kagent.tasks import egress_expire
from tests.conftest import make_tenant

pytestmark = pytest.mark.django_db


def event(tenant: Any, endpoint: Any, *, days_old: float, status: str | None = "succeeded", dispatched: bool = True):
    at = timezone.now() - timedelta(days=days_old)
    made = WebhookEvent.objects.create(
        project=tenant.project,
        type="ticket.created",
        object_id="tkt_1",
        data={},
        created_at=at,
        dispatched_at=at if dispatched else None,
    )
    if status is not None:
        delivery = WebhookDelivery.objects.create(
            project=tenant.project, endpoint=endpoint, event=made, status=status, attempts=1, created_at=at
        )
        WebhookAttempt.objects.create(delivery=delivery, number=1, outcome="succeeded", status_code=200)
    return made


def test_events_done_with_and_older_than_the_retention_go_with_their_delivery_logs(settings):
    settings.KAGENT_WEBHOOK_RETENTION_DAYS = 30
    alice, bob = make_tenant("alice"), make_tenant("bob")
    endpoints = {
        tenant.project.pk: endpoint_create(
            project=tenant.project, url=f"https://hooks.{name}.example/k", event_types=["ticket.created"]
        )[0]
        for name, tenant in (("alice", alice), ("bob", bob))
    }
    old = [event(t, endpoints[t.project.pk], days_old=31) for t in (alice, bob)]
    failed = event(alice, endpoints[alice.project.pk], days_old=40, status="failed")
    no_endpoint = event(alice, endpoints[alice.project.pk], days_old=31, status=None)
    recent = event(alice, endpoints[alice.project.pk], days_old=29)
    pending = event(alice, endpoints[alice.project.pk], days_old=31, status="pending")  # still being sent
    undispatched = event(bob, endpoints[bob.project.pk], days_old=31, status=None, dispatched=False)

    assert expire.apply().get() == 4
    assert set(WebhookEvent.objects.values_list("pk", flat=True)) == {recent.pk, pending.pk, undispatched.pk}
    assert not WebhookDelivery.objects.filter(event_id__in=[e.pk for e in (*old, failed, no_endpoint)]).exists()
    assert WebhookAttempt.objects.count() == 2  # the recent event's and the pending one's
    assert expire.apply().get() == 0


def alices_endpoint(alice: Any) -> Any:
    url = "https://hooks.alice.example/k"
    made, _ = endpoint_create(project=alice.project, url=url, event_types=["ticket.created"])
    return made


def test_a_redelivery_keeps_its_old_event(settings):
    settings.KAGENT_WEBHOOK_RETENTION_DAYS = 30
    alice = make_tenant("alice")
    endpoint = alices_endpoint(alice)
    old = event(alice, endpoint, days_old=31, status="failed")
    delivery_redeliver(delivery=WebhookDelivery.objects.get(event=old))  # the business asks for it again
    assert webhook_events_expire(before=timezone.now() - timedelta(days=30)) == 0
    assert WebhookDelivery.objects.get(event=old).status == "pending"


def test_a_delivery_its_event_took_meanwhile_is_not_found_when_redelivered(settings):
    """Read for the redelivery (the dashboard's page, the API's lookup), then deleted with its event by retention before
    the redelivery locks it: a 404, not a server error."""
    alice = make_tenant("alice")
    old = event(alice, alices_endpoint(alice), days_old=31, status="failed")
    delivery = WebhookDelivery.objects.get(event=old)
    assert webhook_events_expire(before=timezone.now() - timedelta(days=30)) == 1
    with pytest.raises(NotFound):
        delivery_redeliver(delivery=delivery)


def test_the_limit_of_a_pass_and_a_retention_of_zero(settings):
    alice = make_tenant("alice")
    endpoint = alices_endpoint(alice)
    for _ in range(5):
        event(alice, endpoint, days_old=100)
    before = timezone.now() - timedelta(days=30)
    assert webhook_events_expire(before=before, batch=2, limit=3) == 3  # two batches, the second cut to the limit
    settings.KAGENT_WEBHOOK_RETENTION_DAYS = 0  # kept for good
    assert expire.apply().get() == 0 and WebhookEvent.objects.count() == 2
    assert webhook_events_expire(before=before, batch=2) == 2


def egress(tenant: Any, *, days_old: float) -> EgressEvent:
    return EgressEvent.objects.create(
        project=tenant.project if tenant else None,
        purpose="http_tool",
        method="GET",
        host="api.example.com",
        decision="allowed",
        status=200,
        created_at=timezone.now() - timedelta(days=days_old),
    )


def test_egress_log_rows_older_than_the_retention_go(settings):
    settings.KAGENT_EGRESS_RETENTION_DAYS = 90
    alice = make_tenant("alice")
    old = [egress(alice, days_old=91), egress(None, days_old=120), egress(alice, days_old=95)]
    kept = [egress(alice, days_old=89), egress(None, days_old=1)]
    assert egress_expire.apply().get() == 3
    assert set(EgressEvent.objects.values_list("pk", flat=True)) == {e.pk for e in kept}
    assert not EgressEvent.objects.filter(pk__in=[e.pk for e in old]).exists()
    assert egress_expire.apply().get() == 0

    for _ in range(5):
        egress(alice, days_old=100)
    assert egress_events_expire(before=timezone.now() - timedelta(days=90), batch=2, limit=3) == 3
    settings.KAGENT_EGRESS_RETENTION_DAYS = 0
    assert egress_expire.apply().get() == 0 and EgressEvent.objects.count() == 4


def test_beat_runs_both():
    tasks = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    assert {"hooks.expire", "kagent.egress_expire"} <= tasks


def test_a_pass_takes_every_project_once_from_a_random_one_and_stops_on_its_budget():
    from kagent.selectors import project_ids_rotated

    projects = {make_tenant(f"t{n}").project.pk for n in range(6)}
    passes = [list(project_ids_rotated()) for _ in range(30)]
    assert all(sorted(ids) == sorted(projects) for ids in passes)  # each once
    assert len({ids[0] for ids in passes}) > 1  # not always the same first (30 draws of 6: all alike ~1e-23)

    alice = next(iter(Project.objects.all()))
    for days_old in (100, 100):
        EgressEvent.objects.create(
            project=alice,
            purpose="http_tool",
            method="GET",
            host="h.example",
            decision="allowed",
            created_at=timezone.now() - timedelta(days=days_old),
        )
    assert egress_events_expire(before=timezone.now(), budget_s=0) == 0
    assert egress_events_expire(before=timezone.now()) == 2
