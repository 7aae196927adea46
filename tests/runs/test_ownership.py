"""A worker that lost its run (its lease ran out and another worker claimed it) writes nothing more; cancels are
honoured up to the last write; a run that keeps killing its workers is stopped."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from fakes.llm import calls, text
from llm.types import ModelError
from runs import engine, lifecycle
from runs.models import Run, RunStep, ToolCall

pytestmark = pytest.mark.django_db
CART = {
    "name": "get_cart",
    "description": "Returns the items in the cart.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    "effect": "read",
}


def another_worker_takes_over(run_id):
    Run.objects.filter(pk=run_id).update(lease_expires_at=timezone.now() - datetime.timedelta(seconds=1))
    assert lifecycle.run_sweep()["requeued"] == 1
    engine.run_execute(run_id)  # worker B


def test_a_stale_worker_cannot_fail_the_run_or_cancel_its_calls(h, monkeypatch):
    agent = h.agent("stale", [calls(("get_cart", {})), text("ok")], tools={"client": [CART]})
    session = h.session(agent)
    started = h.start(agent, "cart?", session=session)
    real, seen = engine.providers.complete, {"n": 0}

    def outage(request):
        seen["n"] += 1
        if seen["n"] == 1:  # worker A's model call outlives its lease; B runs the whole round meanwhile
            another_worker_takes_over(started["id"])
            raise ModelError("timed out (after 3 attempts)", retryable=False)
        return real(request)

    monkeypatch.setattr(engine.providers, "complete", outage)
    engine.run_execute(started["id"])  # worker A
    run = h.get(started["id"])
    assert run["status"] == "requires_action"
    call_id = run["required_action"]["tool_calls"][0]["call_id"]
    assert ToolCall.objects.get(pk=call_id).status == "awaiting_output"
    response = h.api.post(
        f"/v1/runs/{started['id']}/submit_tool_outputs",
        {"tool_outputs": [{"call_id": call_id, "output": {"items": 2}}]},
        format="json",
    )
    assert response.status_code == 200


def test_a_stale_worker_cannot_write_private_content_back_after_the_purge(h, monkeypatch):
    agent = h.agent("slow", [text("SECRET ANSWER")] * 3)
    started = h.start(agent, "private question", store=False)
    real, seen = engine.providers.complete, {"n": 0}

    def slow(request):
        seen["n"] += 1
        if seen["n"] == 1:
            another_worker_takes_over(started["id"])
            assert h.get(started["id"])["status"] == "completed"  # read once: purged
        return real(request)

    monkeypatch.setattr(engine.providers, "complete", slow)
    engine.run_execute(started["id"])  # worker A comes back with its answer
    assert all(step.data == {} for step in RunStep.objects.filter(run_id=started["id"]))
    assert Run.objects.get(pk=started["id"]).transcript == []


def test_cancel_during_the_final_model_call_ends_cancelled_not_completed(h, monkeypatch):
    agent = h.agent("late-cancel", [text("Here is your answer.")])
    session = h.session(agent)
    started = h.start(agent, "q", session=session)
    real = engine.providers.complete

    def cancelled_meanwhile(request):
        response = real(request)
        h.api.post(f"/v1/runs/{started['id']}/cancel")
        return response

    monkeypatch.setattr(engine.providers, "complete", cancelled_meanwhile)
    run = h.drive(started["id"])
    assert run["status"] == "cancelled" and run["output"] is None
    assert h.api.get(f"/v1/sessions/{session}/messages").json()["data"][0]["role"] == "user"


def test_cancel_during_the_last_call_of_a_round_does_not_pause(h, monkeypatch):
    agent = h.agent("late-cancel-2", [calls(("get_cart", {})), text("x")], tools={"client": [CART]})
    session = h.session(agent)
    started = h.start(agent, "q", session=session)
    original = engine.store.record_round

    def record_then_cancel(*args, **kwargs):
        # The round is written with its client call waiting for the app; the cancel comes right after.
        fence = original(*args, **kwargs)
        Run.objects.filter(pk=started["id"]).update(cancel_requested=True, cancellation_reason="requested")
        return fence

    monkeypatch.setattr(engine.store, "record_round", record_then_cancel)
    run = h.drive(started["id"])
    assert run["status"] == "cancelled" and run["required_action"] is None
    assert ToolCall.objects.get(run_id=started["id"]).status == "cancelled"


def test_a_run_that_keeps_killing_its_workers_is_stopped(h):
    agent = h.agent("poison", [text("never")])
    started = h.start(agent)
    Run.objects.filter(pk=started["id"]).update(claims=engine.MAX_CLAIMS)
    run = h.drive(started["id"])
    assert run["status"] == "failed" and run["last_error"]["code"] == "internal_error"
    assert h.fake.requests("poison") == []


@pytest.mark.django_db(transaction=True)  # the keeper thread has its own connection: it must see committed rows
def test_the_lease_is_kept_while_a_model_call_is_slow(h, settings, monkeypatch):
    """The keeper thread renews the lease during a long model call, so the sweeper leaves the run alone — also when
    the thread fell asleep under a longer lease than the run's (it looks every 5 s under the default one)."""
    import threading

    from runs.lease import KEEPER

    with KEEPER.kept("run_before", held_by=1):  # the thread, started under the default lease of 120 s
        pass
    threading.Event().wait(0.2)
    settings.KAGENT_RUN_LEASE_SECONDS = 3
    agent = h.agent("slow-model", [text("hello")])
    started = h.start(agent)
    real = engine.providers.complete
    leases = []

    def slow(request):
        for _ in range(3):
            threading.Event().wait(1.2)
            leases.append(Run.objects.values_list("lease_expires_at", flat=True).get(pk=started["id"]))
        return real(request)

    monkeypatch.setattr(engine.providers, "complete", slow)
    run = h.drive(started["id"])
    assert run["status"] == "completed"
    assert leases == sorted(leases) and leases[-1] > leases[0]  # renewed while the call was running
