"""Events delivered to a real HTTPS receiver on loopback that verifies each Standard Webhooks signature with the
`standardwebhooks` package: what is sent (the object as the API renders it, webhook-id = the event id), when it is
retried, when it stops, when the endpoint is disabled, redelivery; never for sandbox runs, never a `store: false`
run's content. The workers' part is done here in order by `pump` (tests/hooks/test_worker_delivery.py uses a real
Celery worker)."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks import Webhook

from desk.models import Ticket
from fakes.llm import calls, text
from hooks.deliveries import AttemptResult, delivery_attempt, event_dispatch
from hooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent
from hooks.sweep import hooks_sweep
from tests.hooks.conftest import create_endpoint, pump, received
from tests.runs.conftest import VERIFIED

pytestmark = pytest.mark.django_db

TICKET_TURNS = [
    calls(("create_ticket", {"title": "Damaged box", "description": "Crushed in transit", "priority": "high"})),
    text("Ticket TKT-1 is open."),
]
TICKET_TOOLS = {"builtin": {"create_ticket": {"enabled": True}}}


def verify(request, secret):
    """As a business would: the `standardwebhooks` package with the endpoint's secret."""
    return Webhook(secret).verify(request.body, request.headers)


def test_ticket_created_and_run_completed_reach_the_endpoint_signed(hk, upstream):
    endpoint = create_endpoint(hk.api, upstream, types=["ticket.created", "run.completed"])
    agent = hk.agent("hook-ticket", TICKET_TURNS, tools=TICKET_TOOLS)
    run = hk.run(agent, "my box arrived crushed", allow_actions=True, **VERIFIED)
    assert run["status"] == "completed"
    pump()

    got = received(upstream)
    assert sorted(body["type"] for _, body in got) == ["run.completed", "ticket.created"]
    for request, body in got:
        assert request.method == "POST" and request.headers["content-type"] == "application/json"
        assert request.headers["user-agent"] == "K-Agent/1"
        assert request.headers["webhook-id"] == body["id"] and body["id"].startswith("evt_")
        assert verify(request, endpoint.secret) == body
        assert set(body) == {"id", "type", "created_at", "data"}
    by_type = {body["type"]: body["data"] for _, body in got}
    ticket = hk.api.get("/v1/tickets").json()["data"][0]
    assert by_type["ticket.created"] == ticket  # the object as the API renders it
    assert by_type["ticket.created"]["number"] == "TKT-1" and by_type["ticket.created"]["end_user"] == "cust-42"
    assert by_type["run.completed"] == hk.get(run["id"])
    assert by_type["run.completed"]["output"]["text"] == "Ticket TKT-1 is open."

    deliveries = hk.api.get(f"/v1/webhook_endpoints/{endpoint.id}/deliveries").json()["data"]
    assert {d["status"] for d in deliveries} == {"succeeded"}
    log = deliveries[0]["log"]
    assert [(a["number"], a["outcome"], a["status_code"], a["error_code"]) for a in log] == [
        (1, "succeeded", 200, None)
    ]
    assert '"received": true' in log[0]["response_excerpt"] or '"received":true' in log[0]["response_excerpt"]


def test_a_project_without_endpoints_records_nothing(hk, upstream):
    agent = hk.agent("no-hooks", TICKET_TURNS, tools=TICKET_TOOLS)
    run = hk.run(agent, "crushed", allow_actions=True, **VERIFIED)
    assert run["status"] == "completed" and Ticket.objects.count() == 1
    pump()
    assert WebhookEvent.objects.count() == 0 and upstream.received == []


def test_endpoints_get_only_the_types_they_subscribed_to(hk, upstream):
    create_endpoint(hk.api, upstream, types=["handoff.created"])
    agent = hk.agent("only-handoffs", TICKET_TURNS, tools=TICKET_TOOLS)
    hk.run(agent, "crushed", allow_actions=True, **VERIFIED)
    pump()
    assert WebhookEvent.objects.count() == 0 and upstream.received == []


def test_sandbox_runs_never_reach_webhooks(hk, upstream):
    create_endpoint(hk.api, upstream)
    agent = hk.agent("sandbox-hooks", TICKET_TURNS, tools=TICKET_TOOLS, publish=False)
    run = hk.run(
        agent, "crushed", sandbox=True, run_real_actions=True, allow_actions=True, end_user={"external_id": "t"}
    )
    assert run["status"] == "completed"
    assert Ticket.objects.get().is_test is True
    pump()
    assert WebhookEvent.objects.count() == 0 and upstream.received == []


def test_store_false_runs_send_ids_and_statuses_never_content(hk, upstream):
    create_endpoint(hk.api, upstream, types=["run.completed"])
    agent = hk.agent("private", [text("Your order 8812 ships Tuesday to 12 Palm Street.")])
    run = hk.run(agent, "order 8812: my address is 12 Palm Street", store=False, metadata={"order": "8812"})
    assert run["status"] == "completed"
    pump()
    [(request, body)] = received(upstream)
    data = body["data"]
    assert data["id"] == run["id"] and data["status"] == "completed" and data["store"] is False
    assert data["agent"] == agent and data["object"] == "run"
    assert data["input"] is None and data["output"] is None and data["metadata"] == {}
    assert b"Palm" not in request.body and b"8812" not in request.body


def test_a_receiver_that_fails_twice_then_succeeds(hk, upstream, settings):
    settings.KAGENT_WEBHOOK_RETRY_SECONDS = [0.0, 0.0, 0.0]
    endpoint = create_endpoint(hk.api, upstream, types=["ticket.updated"])
    upstream.canned["hook"].statuses = [500, 503]
    ticket = _ticket(hk)
    hk.api.patch(f"/v1/tickets/{ticket}", {"status": "closed"}, format="json")
    pump()

    got = received(upstream)
    assert len(got) == 3
    assert len({request.headers["webhook-id"] for request, _ in got}) == 1  # the same id on every attempt
    assert len({request.body for request, _ in got}) == 1
    assert all(verify(request, endpoint.secret) for request, _ in got)
    [delivery] = hk.api.get(f"/v1/webhook_endpoints/{endpoint.id}/deliveries").json()["data"]
    assert delivery["status"] == "succeeded" and delivery["attempts"] == 3
    assert [(a["outcome"], a["status_code"], a["error_code"]) for a in reversed(delivery["log"])] == [
        ("retrying", 500, "http_status"),
        ("retrying", 503, "http_status"),
        ("succeeded", 200, None),
    ]
    assert hk.api.get(f"/v1/webhook_endpoints/{endpoint.id}").json()["failing_since"] is None


def test_retries_back_off_with_jitter_on_the_configured_schedule(hk, upstream, settings):
    settings.KAGENT_WEBHOOK_RETRY_SECONDS = [10.0, 600.0]
    create_endpoint(hk.api, upstream, types=["ticket.updated"], name="down")
    upstream.respond("down", status=503, json_body={"error": "maintenance"})
    hk.api.patch(f"/v1/tickets/{_ticket(hk)}", {"status": "closed"}, format="json")
    before = timezone.now()
    pump()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "pending" and delivery.attempts == 1
    wait = (delivery.next_attempt_at - before).total_seconds()
    assert 8 - 1 <= wait <= 12 + 1  # 10 s ± 20%
    # Due again: the second attempt fails too and waits the schedule's next step.
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    before = timezone.now()
    pump()
    delivery.refresh_from_db()
    assert delivery.attempts == 2 and delivery.status == "pending"
    assert 480 - 1 <= (delivery.next_attempt_at - before).total_seconds() <= 720 + 1
    assert AttemptResult("retrying", delivery.next_attempt_at).countdown is None  # the sweep's job
    assert WebhookEndpoint.objects.get().failing_since is not None


@pytest.mark.parametrize(
    ("status", "attempts", "outcome"),
    [(400, 1, "failed"), (404, 1, "failed"), (410, 1, "failed"), (408, 3, "failed"), (429, 3, "failed")],
)
def test_4xx_stops_the_retries_but_408_and_429_are_retried(hk, upstream, settings, status, attempts, outcome):
    settings.KAGENT_WEBHOOK_RETRY_SECONDS = [0.0, 0.0]
    create_endpoint(hk.api, upstream, types=["ticket.updated"], name="picky")
    upstream.respond("picky", status=status, json_body={"error": "no"})
    hk.api.patch(f"/v1/tickets/{_ticket(hk)}", {"status": "closed"}, format="json")
    pump()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == outcome and delivery.attempts == attempts
    assert len(upstream.received) == attempts
    assert delivery.last_status_code == status


def test_an_endpoint_that_keeps_failing_is_disabled_and_says_why(hk, upstream, settings):
    settings.KAGENT_WEBHOOK_RETRY_SECONDS = [0.0, 0.0]
    endpoint = create_endpoint(hk.api, upstream, types=["ticket.updated"], name="broken")
    upstream.respond("broken", status=500, json_body={"error": "boom"})
    ticket = _ticket(hk)
    hk.api.patch(f"/v1/tickets/{ticket}", {"status": "closed"}, format="json")
    pump()

    shown = hk.api.get(f"/v1/webhook_endpoints/{endpoint.id}").json()
    assert shown["enabled"] is False
    assert "failed for about a day (3 attempts; the last: HTTP 500)" in shown["disabled_reason"]
    [delivery] = hk.api.get(f"/v1/webhook_endpoints/{endpoint.id}/deliveries").json()["data"]
    assert delivery["status"] == "failed" and delivery["attempts"] == 3
    assert [a["outcome"] for a in delivery["log"]] == ["failed", "retrying", "retrying"]
    assert delivery["log"][0]["note"] == shown["disabled_reason"]  # said in the log too

    # Disabled: nothing more is recorded for it, and redelivery says to enable it first.
    hk.api.patch(f"/v1/tickets/{ticket}", {"status": "open"}, format="json")
    assert WebhookEvent.objects.count() == 1
    refused = hk.api.post(f"/v1/webhook_endpoints/{endpoint.id}/deliveries/{delivery['id']}/redeliver")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "endpoint_disabled"

    # Fixed and enabled again: the failed delivery goes out on request, with its event's id.
    upstream.respond("broken", status=204, body=b"")
    hk.api.patch(f"/v1/webhook_endpoints/{endpoint.id}", {"enabled": True}, format="json")
    again = hk.api.post(f"/v1/webhook_endpoints/{endpoint.id}/deliveries/{delivery['id']}/redeliver")
    assert again.status_code == 202, again.json()
    pump()
    ids = [r.headers["webhook-id"] for r in upstream.received]
    assert len(ids) == 4 and len(set(ids)) == 1
    redelivered = hk.api.get(f"/v1/webhook_endpoints/{endpoint.id}/deliveries").json()["data"][0]
    assert redelivered["status"] == "succeeded"
    assert (redelivered["log"][0]["manual"], redelivered["log"][0]["status_code"]) == (True, 204)


def test_redelivery_keeps_the_webhook_id_and_the_body(hk, upstream):
    endpoint = create_endpoint(hk.api, upstream, types=["ticket.updated"])
    hk.api.patch(f"/v1/tickets/{_ticket(hk)}", {"priority": "urgent"}, format="json")
    pump()
    [delivery] = hk.api.get(f"/v1/webhook_endpoints/{endpoint.id}/deliveries").json()["data"]
    response = hk.api.post(f"/v1/webhook_endpoints/{endpoint.id}/deliveries/{delivery['id']}/redeliver")
    assert response.status_code == 202 and response.json()["status"] == "pending"
    pump()
    first, second = upstream.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == delivery["event"]["id"]
    assert first.body == second.body
    assert first.headers["webhook-signature"] != second.headers["webhook-signature"] or (
        first.headers["webhook-timestamp"] == second.headers["webhook-timestamp"]
    )
    assert verify(second, endpoint.secret)["data"]["priority"] == "urgent"


def test_redelivering_a_delivery_that_is_still_retrying_keeps_its_retries(hk, upstream, settings):
    settings.KAGENT_WEBHOOK_RETRY_SECONDS = [600.0, 600.0, 600.0]
    endpoint = create_endpoint(hk.api, upstream, types=["ticket.updated"], name="down")
    upstream.respond("down", status=503, json_body={"error": "maintenance"})
    hk.api.patch(f"/v1/tickets/{_ticket(hk)}", {"status": "closed"}, format="json")
    pump()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "pending" and delivery.attempts == 1  # the next try is 10 minutes away
    # The business clicks Redeliver while its endpoint still answers 503: that attempt fails too...
    url = f"/v1/webhook_endpoints/{endpoint.id}/deliveries/{delivery.pk}/redeliver"
    assert hk.api.post(url).status_code == 202
    pump()
    delivery.refresh_from_db()
    # ...and the automatic retries it had left go on.
    assert delivery.attempts == 2 and delivery.status == "pending" and delivery.next_attempt_at > timezone.now()
    upstream.respond("down", status=200, json_body={"ok": True})
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    pump()
    delivery.refresh_from_db()
    assert delivery.status == "succeeded" and delivery.attempts == 3


def test_after_a_rotation_both_secrets_sign(hk, upstream):
    endpoint = create_endpoint(hk.api, upstream, types=["ticket.updated"])
    new_secret = hk.api.post(f"/v1/webhook_endpoints/{endpoint.id}/rotate_secret").json()["secret"]
    upstream.secrets = [new_secret, endpoint.secret]
    hk.api.patch(f"/v1/tickets/{_ticket(hk)}", {"status": "closed"}, format="json")
    pump()
    [request] = upstream.received
    assert request.signature_valid == [True, True]
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    # After the overlap only the new one signs.
    WebhookEndpoint.objects.update(previous_secret_expires_at=timezone.now() - timedelta(seconds=1))
    hk.api.patch(f"/v1/tickets/{_ticket(hk, number=2)}", {"status": "closed"}, format="json")
    pump()
    assert upstream.received[-1].signature_valid == [True, False]


def test_the_log_masks_the_secret_and_bounds_the_excerpt(hk, upstream):
    endpoint = create_endpoint(hk.api, upstream, types=["ticket.updated"], name="echo")
    bare = endpoint.secret.removeprefix("whsec_")
    upstream.respond("echo", json_body={"you_sent_secret": endpoint.secret, "bare": bare, "padding": "p" * 5000})
    hk.api.patch(f"/v1/tickets/{_ticket(hk)}", {"status": "closed"}, format="json")
    pump()
    attempt = WebhookAttempt.objects.get()
    assert endpoint.secret not in attempt.response_excerpt
    assert bare not in attempt.response_excerpt and base64.b64decode(bare).hex() not in attempt.response_excerpt
    assert attempt.response_excerpt.count("****") == 2 and len(attempt.response_excerpt) <= 500


def test_an_unreachable_endpoint_is_retried_with_a_network_code(hk, upstream, settings, egress_settings):
    settings.KAGENT_WEBHOOK_RETRY_SECONDS = [60.0]
    endpoint = create_endpoint(hk.api, upstream, types=["ticket.updated"])
    # tools.test:443 resolves to the receiver's address, where nothing listens on 443.
    WebhookEndpoint.objects.filter(pk=endpoint.id).update(url="https://tools.test/hook")
    hk.api.patch(f"/v1/tickets/{_ticket(hk)}", {"status": "closed"}, format="json")
    pump()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "pending" and delivery.last_error_code == "connect_failed"
    assert delivery.last_status_code is None


def test_a_worker_that_died_holding_a_delivery_lets_the_sweep_send_it_again(hk, upstream):
    create_endpoint(hk.api, upstream, types=["ticket.updated"])
    hk.api.patch(f"/v1/tickets/{_ticket(hk)}", {"status": "closed"}, format="json")
    queued: list[str] = []
    assert hooks_sweep(dispatch=queued.append, deliver=queued.append) == {"dispatched": 0, "queued": 0}
    WebhookEvent.objects.update(created_at=timezone.now() - timedelta(seconds=30))
    assert hooks_sweep(dispatch=queued.append, deliver=queued.append)["dispatched"] == 1
    event_dispatch(event_id=queued[-1])
    delivery = WebhookDelivery.objects.get()
    # A worker took it and died: its lease is still running, so nobody else sends it.
    WebhookDelivery.objects.update(leased_until=timezone.now() + timedelta(seconds=60))
    assert delivery_attempt(delivery_id=delivery.pk) is None
    assert hooks_sweep(dispatch=queued.append, deliver=queued.append)["queued"] == 0
    # The lease ran out: the sweep queues it and the next attempt sends it.
    WebhookDelivery.objects.update(leased_until=timezone.now() - timedelta(seconds=1))
    assert hooks_sweep(dispatch=queued.append, deliver=queued.append)["queued"] == 1
    assert queued[-1] == delivery.pk
    assert delivery_attempt(delivery_id=delivery.pk).outcome == "succeeded"
    assert len(upstream.received) == 1


def test_someone_elses_deliveries_are_404(hk, upstream, bob):
    endpoint = create_endpoint(hk.api, upstream, types=["ticket.updated"])
    hk.api.patch(f"/v1/tickets/{_ticket(hk)}", {"status": "closed"}, format="json")
    pump()
    delivery = WebhookDelivery.objects.get()
    other = bob.client()
    assert other.get(f"/v1/webhook_endpoints/{endpoint.id}/deliveries").status_code == 404
    assert other.post(f"/v1/webhook_endpoints/{endpoint.id}/deliveries/{delivery.pk}/redeliver").status_code == 404
    # Bob's own endpoint doesn't reach alice's delivery either.
    bobs = create_endpoint(other, upstream, types=["ticket.updated"], name="bob")
    assert other.post(f"/v1/webhook_endpoints/{bobs.id}/deliveries/{delivery.pk}/redeliver").status_code == 404
    assert len(upstream.received) == 1


def _ticket(hk, number: int = 1) -> str:
    """A ticket of a customer's, as create_ticket makes it."""
    return Ticket.objects.create(
        project=hk.tenant.project,
        number=number,
        title="Damaged box",
        description="Crushed",
        rate_key=f"eu:customer-{number}",
    ).pk


def test_a_run_that_needs_the_app_and_is_then_cancelled(hk, upstream):
    create_endpoint(hk.api, upstream, types=["run.requires_action", "run.cancelled", "run.completed"])
    agent = hk.agent(
        "cart",
        [calls(("get_cart", {})), text("Two items.")],
        tools={"client": [{"name": "get_cart", "description": "The cart.", "effect": "read"}]},
    )
    run = hk.run(agent, "what's in my cart?")
    assert run["status"] == "requires_action"
    pump()
    assert hk.api.post(f"/v1/runs/{run['id']}/cancel").status_code == 200
    pump()
    got = received(upstream)
    assert [body["type"] for _, body in got] == ["run.requires_action", "run.cancelled"]
    paused, cancelled = got[0][1]["data"], got[1][1]["data"]
    assert paused["status"] == "requires_action"
    assert [c["name"] for c in paused["required_action"]["tool_calls"]] == ["get_cart"]
    assert cancelled["status"] == "cancelled" and cancelled["cancellation_reason"] == "requested"
    assert len({request.headers["webhook-id"] for request, _ in got}) == 2


def test_recording_a_runs_event_adds_no_statement_to_the_run(hk, upstream, django_assert_max_num_queries):
    """The outbox row rides in the engine's completing statement (tests/runs/test_engine.py pins the same 6)."""
    from runs import engine

    create_endpoint(hk.api, upstream, types=["run.completed"])
    agent = hk.agent("pinned-hooks", [text("a"), text("b")])
    hk.run(agent)  # warm
    started = hk.start(agent)
    with django_assert_max_num_queries(6):
        engine.run_execute(started["id"])
    assert WebhookEvent.objects.filter(object_id=started["id"], type="run.completed").count() == 1


def test_a_pause_answered_before_its_webhook_left_still_tells_what_was_asked(hk, upstream):
    # A pause's event is rendered when it is recorded: the app's answer takes the run's required action away, and the
    # next pause puts another one there, both possibly before the first event is dispatched (a busy queue). Each
    # webhook tells of the pause it reports.
    create_endpoint(hk.api, upstream, types=["run.requires_action"])
    client_tools = [
        {"name": "get_cart", "description": "The cart.", "effect": "read"},
        {"name": "get_wishlist", "description": "The wishlist.", "effect": "read"},
    ]
    agent = hk.agent(
        "cart-then-wishlist",
        [calls(("get_cart", {})), calls(("get_wishlist", {})), text("Two items, one wished for.")],
        tools={"client": client_tools},
    )
    run = hk.run(agent, "what's in my cart and my wishlist?")
    [first] = run["required_action"]["tool_calls"]
    answer = {"tool_outputs": [{"call_id": first["call_id"], "output": {"items": 2}}]}
    assert hk.api.post(f"/v1/runs/{run['id']}/submit_tool_outputs", answer, format="json").status_code == 200
    again = hk.drive(run["id"])
    assert again["status"] == "requires_action"
    [second] = again["required_action"]["tool_calls"]
    pump()  # both events dispatched only now
    got = received(upstream)
    assert [body["data"]["status"] for _, body in got] == ["requires_action", "requires_action"]
    asked = [[call["call_id"] for call in body["data"]["required_action"]["tool_calls"]] for _, body in got]
    assert asked == [[first["call_id"]], [second["call_id"]]]


def test_a_test_event_is_signed_logged_once_and_says_nothing_of_the_endpoints_health(hk, upstream):
    """The dashboard's Send test event (issue 31): a signed ping in the delivery log, not retried, not counted."""
    from tests.dashboard.test_pages import signed_in

    endpoint = create_endpoint(hk.api, upstream, types=["ticket.created"])
    client = signed_in(hk.tenant)
    page = client.post(f"/settings/webhooks/{endpoint.id}/test/", follow=True).content.decode()
    assert "Test event delivered (HTTP 200)" in page
    [(request, body)] = received(upstream)
    assert body["type"] == "ping" and verify(request, endpoint.secret) == body
    [delivery] = WebhookDelivery.objects.filter(endpoint_id=endpoint.id)
    assert delivery.status == "succeeded" and delivery.attempts == 1
    assert WebhookEndpoint.objects.get(pk=endpoint.id).last_success_at is None  # not the endpoint's health
    # An endpoint that refuses it: one attempt, no retry, and the endpoint isn't marked failing.
    upstream.respond("hook", status=500, json_body={"no": True})
    page = client.post(f"/settings/webhooks/{endpoint.id}/test/", follow=True).content.decode()
    assert "The test event was not accepted (HTTP 500)" in page
    failed = WebhookDelivery.objects.filter(endpoint_id=endpoint.id, status="failed").get()
    assert failed.attempts == 1 and failed.next_attempt_at is None
    assert WebhookEndpoint.objects.get(pk=endpoint.id).failing_since is None
