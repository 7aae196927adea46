"""Runs through the API and real Celery worker processes on the configured database and broker: the lifecycle,
two workers racing for one run, and a worker killed mid-run (SIGKILL) with nothing lost and nothing sent twice."""

from __future__ import annotations

import threading
import time

import pytest

from desk.models import Handoff
from fakes.llm import Fault, calls, text
from kagent.tasks import ping
from runs import engine
from runs.lifecycle import run_sweep
from runs.models import Run, ToolCall
from tests.conftest import make_tenant, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

HANDOFF = ("transfer_to_human", {"reason_type": "complaint", "summary": "Parcel arrived damaged"})


def publish(api, script):
    agent = api.post(
        "/v1/agents",
        {
            "name": script,
            "config": {
                "model": {"provider": "openai_compatible", "name": f"script:{script}"},
                "tools": {"client": [{"name": "get_cart", "description": "The cart.", "effect": "read"}]},
            },
        },
        format="json",
    ).json()["id"]
    api.post(f"/v1/agents/{agent}/publish", {}, format="json")
    return agent


def test_run_lifecycle_through_a_real_worker(start_worker, fake_llm):
    tenant = make_tenant("alice")
    api = tenant.client()
    fake_llm.script("life", [calls(HANDOFF), text("A person from our team will continue here.")])
    agent = publish(api, "life")
    worker = start_worker(fake_llm.worker_env())
    response = api.post("/v1/runs", {"agent": agent, "input": "my parcel is broken", "wait": 20}, format="json")
    assert response.status_code == 200, response.json()  # wait saw it settle
    run = response.json()
    assert run["status"] == "completed", run
    assert run["output"]["text"] == "A person from our team will continue here."
    assert Handoff.objects.count() == 1
    # No log line per run at INFO (kagent/celery.py): the run's events say what happened. Other tasks keep theirs.
    ping.delay("after-the-run")
    wait_for(lambda: "kagent.ping" in worker.log(), timeout=20, message="the ping task's lines")
    assert "runs.execute[" not in worker.log()


def test_pause_submit_resume_through_a_real_worker(start_worker, fake_llm):
    tenant = make_tenant("alice")
    api = tenant.client(tenant.publishable_key)  # a browser app: publishable key
    fake_llm.script("pause", [calls(("get_cart", {})), text("Two items in your cart.")])
    agent = publish(tenant.client(), "pause")
    start_worker(fake_llm.worker_env())
    session = api.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    run = api.post("/v1/runs", {"agent": agent, "session": session, "input": "cart?", "wait": 20}, format="json").json()
    assert run["status"] == "requires_action", run
    call_id = run["required_action"]["tool_calls"][0]["call_id"]
    answer = api.post(
        f"/v1/runs/{run['id']}/submit_tool_outputs",
        {"tool_outputs": [{"call_id": call_id, "output": {"items": 2}}]},
        format="json",
    )
    assert answer.status_code == 200
    done = wait_for(
        lambda: (r := api.get(f"/v1/runs/{run['id']}").json())["status"] == "completed" and r,
        timeout=20,
        message="the resumed run to complete",
    )
    assert done["output"]["text"] == "Two items in your cart."


def test_two_workers_race_for_one_run_and_one_wins(start_worker, fake_llm):
    tenant = make_tenant("alice")
    api = tenant.client()
    fake_llm.script("race", [calls(HANDOFF), text("The team has it.")])
    agent = publish(api, "race")
    run_id = api.post("/v1/runs", {"agent": agent, "input": "help"}, format="json").json()["id"]
    # The same run delivered to two workers at once, several times over (duplicate delivery, re-sends).
    from runs.tasks import execute_run

    for _ in range(4):
        execute_run.delay(run_id)
    start_worker(fake_llm.worker_env())
    start_worker(fake_llm.worker_env())
    wait_for(lambda: Run.objects.get(pk=run_id).status == "completed", timeout=30, message="completion")
    run = Run.objects.get(pk=run_id)
    assert run.claims == 1
    assert Handoff.objects.count() == 1
    assert [r.turn for r in fake_llm.requests("race")] == [0, 1]


def test_claim_is_exclusive_under_concurrency(fake_llm):
    """Two threads (two connections) claim the same run at the same moment: exactly one runs it."""
    tenant = make_tenant("alice")
    api = tenant.client()
    fake_llm.script("claim", [text("once", faults=[Fault(delay_s=0.5)])])
    agent = publish(api, "claim")
    run_id = api.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json").json()["id"]
    barrier = threading.Barrier(2)

    def worker() -> None:
        from django.db import connection

        barrier.wait()
        try:
            engine.run_execute(run_id)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    run = Run.objects.get(pk=run_id)
    assert run.status == "completed" and run.claims == 1
    assert len(fake_llm.requests("claim")) == 1


def test_worker_killed_mid_run_loses_nothing_and_repeats_nothing(start_worker, fake_llm, settings):
    tenant = make_tenant("alice")
    api = tenant.client()
    # Round 1 hands over (a side effect); the answer after it hangs long enough to kill the worker mid-call.
    fake_llm.script("crash", [calls(HANDOFF), text("The team has it.", faults=[Fault(delay_s=30)])])
    agent = publish(api, "crash")
    env = {**fake_llm.worker_env(), "KAGENT_RUN_LEASE_SECONDS": "2"}
    first = start_worker(env)
    run_id = api.post("/v1/runs", {"agent": agent, "input": "damaged parcel"}, format="json").json()["id"]
    wait_for(lambda: ToolCall.objects.filter(status="succeeded").exists(), timeout=30, message="the handoff")
    time.sleep(1.0)  # the worker is now inside the second model call, which hangs (the fake answers after 30 s)
    assert Handoff.objects.count() == 1
    first.kill()
    assert Run.objects.get(pk=run_id).status == "in_progress"  # the dead worker's run, still leased

    settings.KAGENT_RUN_LEASE_SECONDS = 2
    time.sleep(2.5)  # the lease runs out
    assert run_sweep()["requeued"] == 1
    start_worker(env)
    wait_for(lambda: Run.objects.get(pk=run_id).status == "completed", timeout=30, message="the run to complete")
    run = Run.objects.get(pk=run_id)
    assert run.claims == 2
    assert run.output["text"] == "The team has it."
    assert Handoff.objects.count() == 1  # the handoff that succeeded before the crash was not made again
    assert ToolCall.objects.get(run=run).status == "succeeded"
