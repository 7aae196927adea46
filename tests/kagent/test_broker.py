"""A task message sent without kombu's producer (`kagent.broker.send`, the one way the product queues a task) is,
field for field, what Celery's `send_task` sends, so a worker reads it as any task (every worker test runs its
runs from such messages); and a run's message that a worker holds is kept in memory only (`kagent.broker.QoS`)."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from celery.app.registry import TaskRegistry
from django.conf import settings

from kagent import broker
from kagent.celery import app
from runs import queue


def popped(queue_name: str) -> dict[str, Any]:
    raw = redis.Redis.from_url(settings.REDIS_URL).rpop(queue_name)
    assert raw is not None, "nothing on the queue"
    return json.loads(raw)


def without_ids(message: dict[str, Any]) -> dict[str, Any]:
    headers, properties = message["headers"], message["properties"]
    task_id = headers["id"]
    assert uuid.UUID(task_id) and headers["root_id"] == properties["correlation_id"] == task_id
    assert uuid.UUID(properties["delivery_tag"])
    for name in ("id", "root_id"):
        headers[name] = "<id>"
    properties["correlation_id"] = properties["delivery_tag"] = "<id>"
    return message


@pytest.mark.parametrize("registered", [False, True])
def test_the_message_is_what_send_task_sends(celery_queue, registered, monkeypatch):
    # send_task takes the task's own time limits into the headers when this process has it registered (once the
    # app is finalized, as in a worker; a web process usually hasn't): `send` does the same.
    if registered:
        import runs.tasks  # noqa: F401  # what a worker has imported

        app.finalize()
        assert app._tasks.get(queue.EXECUTE_TASK) is not None
    else:
        monkeypatch.setattr(app, "_tasks", TaskRegistry())
    run_id = "run_01jh2m4c6kx8t3v5n7q9s1w3y5"
    app.send_task(queue.EXECUTE_TASK, args=(run_id,), argsrepr=f"('{run_id}',)", kwargsrepr="{}")
    sent_by_celery = popped(celery_queue)
    broker.send(queue.EXECUTE_TASK, run_id)
    sent = popped(celery_queue)
    assert sent["properties"]["delivery_info"]["routing_key"] == celery_queue
    assert sent["headers"]["timelimit"] == ([900, 870] if registered else [None, None])
    assert without_ids(sent) == without_ids(sent_by_celery)
    # And two messages never share an id (a worker's ack names the delivery tag).
    broker.send(queue.EXECUTE_TASK, run_id)
    broker.send(queue.EXECUTE_TASK, run_id)
    first, second = popped(celery_queue), popped(celery_queue)
    assert first["headers"]["id"] != second["headers"]["id"]
    assert first["properties"]["delivery_tag"] != second["properties"]["delivery_tag"]


def test_a_message_for_later_carries_its_eta_as_send_task_does(celery_queue):
    app.send_task("hooks.deliver", args=("whd_a",), countdown=30, argsrepr="('whd_a',)", kwargsrepr="{}")
    by_celery = popped(celery_queue)
    broker.send("hooks.deliver", "whd_a", countdown=30)
    sent = popped(celery_queue)
    eta, celery_eta = (
        datetime.fromisoformat(sent["headers"]["eta"]),
        datetime.fromisoformat(by_celery["headers"]["eta"]),
    )
    assert abs((eta - celery_eta).total_seconds()) < 5 and eta > datetime.now(UTC) + timedelta(seconds=20)
    by_celery["headers"]["eta"] = sent["headers"]["eta"] = "<eta>"
    assert without_ids(sent) == without_ids(by_celery)


def test_a_task_sent_by_a_task_carries_its_lineage_as_send_task_does(celery_queue, monkeypatch):
    parent = SimpleNamespace(
        request=SimpleNamespace(id="parent-task", root_id="root-task"), add_trail=lambda result: None
    )
    monkeypatch.setattr(type(app), "current_worker_task", property(lambda self: parent))
    app.send_task(queue.EXECUTE_TASK, args=("run_a",), argsrepr="('run_a',)", kwargsrepr="{}")
    by_celery = popped(celery_queue)
    broker.send(queue.EXECUTE_TASK, "run_a")
    sent = popped(celery_queue)
    assert sent["headers"]["parent_id"] == by_celery["headers"]["parent_id"] == "parent-task"
    assert sent["headers"]["root_id"] == by_celery["headers"]["root_id"] == "root-task"


def test_a_task_with_options_the_message_lacks_is_refused_before_anything_is_sent(celery_queue, monkeypatch):
    import runs.tasks  # noqa: F401

    app.finalize()
    task = app._tasks[queue.EXECUTE_TASK]
    monkeypatch.setattr(task, "_exec_options", {**task._get_exec_options(), "priority": 5})
    with pytest.raises(ValueError, match="priority"):
        broker.send(queue.EXECUTE_TASK, "run_01jh2m4c6kx8t3v5n7q9s1w3y5")
    assert redis.Redis.from_url(settings.REDIS_URL).llen(celery_queue) == 0


def test_the_runs_waiting_on_the_queue_are_read_from_every_priority_list(celery_queue):
    assert queue.runs_waiting() == set()
    broker.send(queue.EXECUTE_TASK, "run_a")
    app.send_task(queue.EXECUTE_TASK, args=("run_b",), priority=6)  # kombu's list of priority 6
    broker.send("hooks.deliver", "run_c")  # another task: names no run
    assert queue.runs_waiting() == {"run_a", "run_b"}
    # More waiting than it will read: it can't tell (the sweeper then keeps to KAGENT_RUN_RESEND_SECONDS).
    assert broker.waiting_arguments(queue.EXECUTE_TASK, limit=2) is None
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.lpush(celery_queue, b"not json")
    client.delete(celery_queue + "\x06\x166")
    assert queue.runs_waiting() == {"run_a"}  # what isn't a task message is skipped


def test_a_queue_out_of_reach_is_none(celery_queue, monkeypatch, tmp_path):
    broker.send(queue.EXECUTE_TASK, "run_a")
    gone = redis.Redis.from_url(f"unix://{tmp_path}/no-redis.sock", socket_connect_timeout=1)
    monkeypatch.setattr(broker, "_client", lambda url: gone)
    assert queue.runs_waiting() is None  # the sweeper can't tell: it keeps to KAGENT_RUN_RESEND_SECONDS


def test_a_run_message_a_worker_holds_has_no_copy_in_redis_and_goes_back_from_memory(celery_queue):
    """kombu keeps a copy of every message a worker holds in Redis (its acknowledgement emulation: two transactions
    per task). A run's message is held in memory only — the sweeper recovers a run whose worker died — and still
    goes back to the queue when the task asks it (a child process lost) or the worker stops holding it."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    broker.send(queue.EXECUTE_TASK, "run_01jh2m4c6kx8t3v5n7q9s1w3y5")
    broker.send("runs.sweep")  # a task that isn't swept: kombu's copy as usual
    with app.connection_for_read() as connection:
        channel = connection.channel()
        try:
            run_message, other = channel.basic_get(celery_queue), channel.basic_get(celery_queue)
            assert run_message.headers["task"] == "runs.execute" and other.headers["task"] == "runs.sweep"
            copies = client.hkeys(channel.unacked_key)
            assert other.delivery_tag.encode() in copies and run_message.delivery_tag.encode() not in copies
            channel.basic_ack(other.delivery_tag)
            assert other.delivery_tag.encode() not in client.hkeys(channel.unacked_key)

            channel.basic_reject(run_message.delivery_tag, requeue=True)  # reject_on_worker_lost
            back = popped(celery_queue)
            assert back["headers"]["task"] == "runs.execute" and back["headers"]["redelivered"] is True
            assert json.loads(base64.b64decode(back["body"]))[0] == ["run_01jh2m4c6kx8t3v5n7q9s1w3y5"]

            broker.send(queue.EXECUTE_TASK, "run_01jh2m4c6kx8t3v5n7q9s1w3y6")
            held = channel.basic_get(celery_queue)
            assert held.delivery_tag.encode() not in client.hkeys(channel.unacked_key)
            channel.qos.restore_unacked()  # the worker stops
            assert json.loads(base64.b64decode(popped(celery_queue)["body"]))[0] == ["run_01jh2m4c6kx8t3v5n7q9s1w3y6"]

            broker.send(queue.EXECUTE_TASK, "run_01jh2m4c6kx8t3v5n7q9s1w3y7")
            done = channel.basic_get(celery_queue)
            channel.basic_ack(done.delivery_tag)
            channel.qos.restore_unacked()
            assert client.llen(celery_queue) == 0  # an acknowledged message doesn't come back
        finally:
            channel.close()


def test_a_run_message_still_held_when_the_worker_closes_its_channel_goes_back_to_the_queue(celery_queue):
    """A worker's shutdown (warm or cold) closes its channel, and kombu restores what it still holds
    (`restore_unacked_once`, after flushing what was acknowledged): a held run's message from memory, once; an
    acknowledged one not at all."""
    broker.send(queue.EXECUTE_TASK, "run_01jh2m4c6kx8t3v5n7q9s1w3y8")
    broker.send(queue.EXECUTE_TASK, "run_01jh2m4c6kx8t3v5n7q9s1w3y9")
    with app.connection_for_read() as connection:
        channel = connection.channel()
        held, done = channel.basic_get(celery_queue), channel.basic_get(celery_queue)
        channel.basic_ack(done.delivery_tag)
        channel.close()
        channel.close()
    back = popped(celery_queue)
    assert back["headers"]["redelivered"] is True and back["properties"]["delivery_tag"] == held.delivery_tag
    assert json.loads(base64.b64decode(back["body"]))[0] == ["run_01jh2m4c6kx8t3v5n7q9s1w3y8"]
    assert redis.Redis.from_url(settings.REDIS_URL).llen(celery_queue) == 0


def queued_length(queue_name: str) -> int:
    return int(redis.Redis.from_url(settings.REDIS_URL).llen(queue_name))


@pytest.mark.django_db(transaction=True)
def test_enqueue_sends_once_the_transaction_commits_and_nothing_if_it_rolls_back(celery_queue):
    from django.db import transaction

    with transaction.atomic():
        broker.enqueue("hooks.deliver", "whd_committed")
        assert queued_length(celery_queue) == 0  # a worker would look for a row it can't see yet
    assert popped(celery_queue)["headers"]["argsrepr"] == "('whd_committed',)"
    with pytest.raises(RuntimeError), transaction.atomic():
        broker.enqueue("hooks.deliver", "whd_rolled_back")
        raise RuntimeError("the request failed")
    assert queued_length(celery_queue) == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("task", "what"),
    [("hooks.dispatch", "an event's dispatch"), ("agents.knowledge_fetch", "a fetch"), ("runs.execute", "a run")],
)
def test_enqueue_with_the_broker_out_of_reach_fails_nobody_and_says_the_sweep_has_it(monkeypatch, caplog, task, what):
    # Whatever the task, the same: the work is committed, the caller answers, the log says who sends it again.
    def down(name: str, *args: str, **options: Any) -> None:
        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")

    monkeypatch.setattr(broker, "send", down)
    broker.enqueue(task, "obj_1")
    assert f"{task} ('obj_1',): the broker is out of reach; its sweep will queue it again" in caplog.text, what
