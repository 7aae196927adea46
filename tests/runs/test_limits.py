"""The per-user limits of the policy check, with fair buckets and no races (issue #12):
- a one-shot run of the business's server (secret key, no end_user) is its own bucket;
- a publishable key's anonymous one-shot runs count per key and client address, the address taken from
  X-Forwarded-For only through KAGENT_TRUSTED_PROXIES;
- runs of one end user racing at the limit let exactly the remaining allowance through, for HTTP tools (20 an hour),
  `create_ticket` (5 a day) and the one open ticket per customer."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from desk.models import Ticket
from fakes.llm import calls, text
from runs import engine
from runs.models import Run, ToolCall
from tests.runs.conftest import VERIFIED, Harness
from tests.runs.test_http_tools import earlier_attempts, order_tool, setup_tool

ANONYMOUS_TOOL_URL = "https://tools.test:8443/respond/order/orders/{{args.order_number}}"


def anonymous_tool(h: Harness, upstream: Any) -> str:
    tool = order_tool(requires_verified_user=False)
    tool["config"] = {**tool["config"], "url": ANONYMOUS_TOOL_URL}
    setup_tool(h, upstream, tool)
    return h.agent(
        "bucket",
        [calls(("order_status", {"order_number": "1"})), text("ok")],
        tools={"http": [{"tool": "order_status"}]},
    )


def statuses(h: Harness, runs: list[dict[str, Any]]) -> list[str]:
    return [h.tool_steps(run["id"])[0]["policy"]["code"] or "allowed" for run in runs]


@pytest.mark.django_db
def test_a_publishable_key_from_one_address_stops_at_twenty(h, upstream, egress_settings):
    agent = anonymous_tool(h, upstream)
    browser = h.tenant.publishable_key
    runs = [h.run(agent, f"order {n}", key=browser) for n in range(25)]
    assert statuses(h, runs) == ["allowed"] * 20 + ["rate_limited"] * 5
    assert len(upstream.received) == 20


@pytest.mark.django_db
def test_behind_a_trusted_proxy_two_addresses_are_two_buckets(h, upstream, egress_settings, settings):
    settings.KAGENT_TRUSTED_PROXIES = ["127.0.0.0/8"]
    agent = anonymous_tool(h, upstream)
    browser = h.tenant.client(h.tenant.publishable_key)

    def run_from(address: str) -> dict[str, Any]:
        response = browser.post(
            "/v1/runs", {"agent": agent, "input": "x"}, format="json", HTTP_X_FORWARDED_FOR=f"{address}, 127.0.0.9"
        )
        assert response.status_code == 201, response.json()
        return h.drive(response.json()["id"])

    first = run_from("203.0.113.10")
    second = run_from("198.51.100.20")
    keys = {Run.objects.get(pk=run["id"]).rate_key for run in (first, second)}
    assert len(keys) == 2 and all(key.endswith(("203.0.113.10", "198.51.100.20")) for key in keys)
    earlier_attempts(ToolCall.objects.get(run_id=first["id"]), 19)  # the first address is at its limit
    assert statuses(h, [run_from("203.0.113.10"), run_from("198.51.100.20")]) == ["rate_limited", "allowed"]


@pytest.mark.django_db
def test_an_untrusted_forwarded_for_is_ignored(h, upstream, egress_settings, settings):
    settings.KAGENT_TRUSTED_PROXIES = []  # the default: nobody's X-Forwarded-For is believed
    agent = anonymous_tool(h, upstream)
    browser = h.tenant.client(h.tenant.publishable_key)
    ids = []
    for n in range(3):
        response = browser.post(
            "/v1/runs", {"agent": agent, "input": "x"}, format="json", HTTP_X_FORWARDED_FOR=f"10.9.9.{n}"
        )
        ids.append(response.json()["id"])
    keys = set(Run.objects.filter(pk__in=ids).values_list("rate_key", flat=True))
    assert len(keys) == 1 and keys.pop().endswith(":127.0.0.1")  # the connection's own address, one bucket


def race(run_ids: list[str]) -> None:
    """Each run executed at the same moment on its own database connection, as parallel workers do."""
    barrier = threading.Barrier(len(run_ids))

    def worker(run_id: str) -> None:
        barrier.wait(timeout=30)
        try:
            engine.run_execute(run_id)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(run_id,)) for run_id in run_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


@pytest.mark.django_db(transaction=True)
def test_runs_of_one_end_user_racing_at_the_limit_let_exactly_the_allowance_through(
    alice, fake_llm, upstream, egress_settings
):
    h = Harness(alice, fake_llm)
    setup_tool(h, upstream)
    agent = h.agent(
        "race-http",
        [calls(("order_status", {"order_number": "8812"})), text("ok")],
        tools={"http": [{"tool": "order_status"}]},
    )
    started = [h.start(agent, f"where is my order? {n}", **VERIFIED) for n in range(10)]
    earlier_attempts_for(started[0]["id"], 17)  # 3 calls left this hour for cust-42
    race([run["id"] for run in started])
    codes = [ToolCall.objects.get(run_id=run["id"], round=1).policy_code or "allowed" for run in started]
    assert sorted(codes) == ["allowed"] * 3 + ["rate_limited"] * 7
    assert len(upstream.received) == 3
    assert all(Run.objects.get(pk=run["id"]).status == "completed" for run in started)


def earlier_attempts_for(run_id: str, count: int) -> None:
    run = Run.objects.get(pk=run_id)
    for n in range(count):
        ToolCall.objects.create(
            project_id=run.project_id,
            run=run,
            round=9,
            index=n,
            model_call_id="m",
            requested_name="order_status",
            name="order_status",
            kind="http",
            rate_key=run.rate_key,
            policy_decision="allowed",
            status="succeeded",
        )


TICKET = ("create_ticket", {"title": "Late parcel", "description": "Not delivered", "priority": "normal"})


@pytest.mark.django_db(transaction=True)
def test_one_open_ticket_per_customer_even_when_runs_race(alice, fake_llm):
    h = Harness(alice, fake_llm)
    agent = h.agent(
        "race-ticket",
        [calls(TICKET), text("Your ticket is being handled.")],
        tools={"builtin": {"create_ticket": {"enabled": True}}},
    )
    session_runs = [h.start(agent, f"my parcel is late {n}", allow_actions=True, **VERIFIED) for n in range(6)]
    race([run["id"] for run in session_runs])
    assert Ticket.objects.filter(status="open").count() == 1
    codes = sorted(ToolCall.objects.get(run_id=run["id"]).policy_code or "allowed" for run in session_runs)
    assert codes == ["allowed"] + ["ticket_already_open"] * 5


@pytest.mark.django_db(transaction=True)
def test_five_tickets_a_day_even_when_runs_race(alice, fake_llm):
    h = Harness(alice, fake_llm)
    agent = h.agent(
        "race-tickets",
        [calls(TICKET), text("Your ticket is being handled.")],
        tools={"builtin": {"create_ticket": {"enabled": True}}},
    )
    first = h.run(agent, "first", allow_actions=True, **VERIFIED)
    rate_key = Run.objects.get(pk=first["id"]).rate_key
    for n in range(3):  # four tickets today in all, every one of them closed
        Ticket.objects.create(
            project=alice.project, number=100 + n, title="t", description="d", rate_key=rate_key, status="closed"
        )
    Ticket.objects.update(status="closed")
    started = [h.start(agent, f"again {n}", allow_actions=True, **VERIFIED) for n in range(6)]
    race([run["id"] for run in started])
    codes = sorted(ToolCall.objects.get(run_id=run["id"]).policy_code or "allowed" for run in started)
    assert codes[0] == "allowed" and codes.count("allowed") == 1  # the fifth ticket of the day, once
    assert set(codes[1:]) <= {"rate_limited", "ticket_already_open"}
    assert Ticket.objects.count() == 5
