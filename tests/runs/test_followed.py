"""The engine wakes a run's event streams (a Redis PUBLISH on the run's channel) only while someone follows the run
(runs/run_events.py): a run nobody follows costs no wake-up; a followed one wakes its follower at each of the engine's
writes; a run made for a wait or a stream is followed from its INSERT; and a follower that starts following while a
tool's result is being written is woken by that write, not missed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

import psycopg
import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from fakes.llm import calls, text
from runs import run_events, store
from runs.models import Run, ToolCall
from tests.conftest import database_url_for_subprocess
from tests.runs.conftest import VERIFIED
from tests.runs.test_http_tools import setup_tool

pytestmark = pytest.mark.django_db(transaction=True)  # wake-ups are sent once a write commits


@contextmanager
def listening(run_id: str) -> Iterator[Callable[[], int]]:
    """Listens on the run's channel without following the run (as a stream would, had it not said so): how many
    wake-ups were sent."""
    subscription = redis.Redis.from_url(settings.REDIS_URL).pubsub(ignore_subscribe_messages=True)
    subscription.subscribe(run_events.channel(run_id))
    heard: list[object] = []

    def count() -> int:
        deadline = time.monotonic() + 0.5  # what was published has arrived by then
        while time.monotonic() < deadline:
            message = subscription.get_message(timeout=0.1)
            if message is not None:
                heard.append(message)
        return len(heard)

    try:
        yield count
    finally:
        subscription.close()


def answered_call(run: Run, index: int) -> ToolCall:
    """An HTTP tool call of `run` recorded as running, with the result its sender is about to write."""
    call = ToolCall.objects.create(
        project_id=run.project_id,
        run_id=run.pk,
        round=1,
        index=index,
        model_call_id=f"call_{index}",
        requested_name="order_status",
        name="order_status",
        kind="http",
        rate_key=run.rate_key,
        status=ToolCall.Status.RUNNING,
    )
    call.status, call.result = ToolCall.Status.SUCCEEDED, {"ok": True}
    return call


def order_agent(h, upstream, name):
    setup_tool(h, upstream)
    return h.agent(
        name,
        [calls(("order_status", {"order_number": "8812"})), text("Order 8812 has shipped.")],
        tools={"http": [{"tool": "order_status"}]},
    )


def test_a_run_nobody_follows_wakes_nobody(h, upstream, egress_settings):
    run_id = h.start(order_agent(h, upstream, "unfollowed"), "where is 8812?", **VERIFIED)["id"]
    with listening(run_id) as heard:
        assert h.drive(run_id)["status"] == "completed"
        assert heard() == 0
    assert Run.objects.get(pk=run_id).followed_until is None


def test_a_followed_run_wakes_its_follower_at_each_write(h, upstream, egress_settings):
    run_id = h.start(order_agent(h, upstream, "followed"), "where is 8812?", **VERIFIED)["id"]
    with listening(run_id) as heard:
        run_events.follow(run_id, 60)
        assert h.drive(run_id)["status"] == "completed"
        # claimed, the round (the model asked for the tool), the tool's result, completed
        assert heard() == 4


def test_following_again_never_shortens_what_another_follower_asked_for(h):
    run_id = h.start(h.agent("longest", [text("hi")]))["id"]
    run_events.follow(run_id, 600)
    longest = Run.objects.get(pk=run_id).followed_until
    run_events.follow(run_id, 60)
    assert Run.objects.get(pk=run_id).followed_until == longest
    assert longest is not None and longest > timezone.now() + timedelta(seconds=590)


def test_a_run_made_for_a_wait_is_followed_from_its_insert(h):
    agent = h.agent("made-followed", [text("hi")])
    before = timezone.now()
    waited = h.start(agent, wait=1)  # nothing drives it: the wait ends after its second
    followed_until = Run.objects.get(pk=waited["id"]).followed_until
    assert followed_until is not None and followed_until >= before + timedelta(seconds=1)
    plain = h.start(agent)
    assert Run.objects.get(pk=plain["id"]).followed_until is None


def test_a_follower_arriving_during_a_result_write_is_woken_by_it(h):
    # The result write reads the run's row with a lock: a follower's UPDATE of `followed_until` that is not yet
    # committed holds it back, and once committed, the write sees it and wakes the follower. (Without the lock the
    # write could read the row from before the follower's commit, while the follower's look at the events had come
    # before the write's commit: the result's event would then wake nobody.)
    run = Run.objects.get(pk=h.start(h.agent("locked", [text("hi")]))["id"])
    call = answered_call(run, 0)
    written = threading.Event()

    def write_the_result() -> None:
        try:
            store.record_result(call, now=timezone.now())
            written.set()
        finally:
            connection.close()

    with listening(run.pk) as heard, psycopg.connect(database_url_for_subprocess()) as follower:
        follower.execute(
            "UPDATE runs_run SET followed_until = now() + interval '1 minute' WHERE id = %s", [run.pk]
        )  # in the follower's transaction, not yet committed
        writer = threading.Thread(target=write_the_result)
        writer.start()
        assert not written.wait(1.0), "the result write did not wait for the follower's row lock"
        follower.commit()
        writer.join(10)
        assert written.is_set()
        assert heard() == 1
    assert ToolCall.objects.get(pk=call.pk).status == ToolCall.Status.SUCCEEDED


def test_a_busy_stream_keeps_its_run_followed(h, monkeypatch):
    # A stream renews its mark on a timer of its own: events that keep coming (so that no keep-alive is ever due)
    # must not let the mark run out, or the events after it would wake nobody until the stream looked by itself.
    from kagent import streams as sse
    from runs import streams

    monkeypatch.setattr(sse, "KEEPALIVE_S", 1.5)
    monkeypatch.setattr(streams, "FOLLOW_S", 2.0)
    run = Run.objects.get(pk=h.start(h.agent("busy", [text("hi")]))["id"])
    response = h.api.get(f"/v1/runs/{run.pk}/events")
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.extend(response.streaming_content))
    writes = 0
    with listening(run.pk) as heard:
        reader.start()
        time.sleep(0.5)  # the stream is subscribed and following
        deadline = time.monotonic() + 5.0  # well past the first mark's end, with events all along
        while time.monotonic() < deadline:
            store.record_result(answered_call(run, writes), now=timezone.now())
            writes += 1
            time.sleep(0.25)
        assert heard() == writes  # every result woke the stream
    assert h.api.post(f"/v1/runs/{run.pk}/cancel", {}, format="json").status_code == 200
    reader.join(10)
    assert not reader.is_alive()
    assert b"".join(received).count(b"event: run.step.created") == writes
