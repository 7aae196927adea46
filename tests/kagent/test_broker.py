"""The run's task message sent without kombu's producer (`kagent.broker.send_lean`) is, field for field, what Celery's
`send_task` sends, so a worker reads it as any task (every worker test runs its runs from such messages)."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
import redis
from celery.app.registry import TaskRegistry

from kagent import broker
from kagent.celery import app
from runs import queue


def popped(queue_name: str) -> dict[str, Any]:
    raw = redis.Redis.from_url(app.conf.broker_url).rpop(queue_name)
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
def test_the_lean_message_is_what_send_task_sends(celery_queue, registered, monkeypatch):
    # send_task takes the task's own time limits into the headers when this process has it registered (once the
    # app is finalized, as in a worker; a web process usually hasn't): the lean message does the same.
    if registered:
        import runs.tasks  # noqa: F401  # what a worker has imported

        app.finalize()
        assert app._tasks.get(queue.EXECUTE_TASK) is not None
    else:
        monkeypatch.setattr(app, "_tasks", TaskRegistry())
    assert broker.lean_possible(app)  # the configuration the product (and the worker tests) run with Redis
    run_id = "run_01jh2m4c6kx8t3v5n7q9s1w3y5"
    app.send_task(queue.EXECUTE_TASK, args=(run_id,), argsrepr=f"('{run_id}',)", kwargsrepr="{}")
    sent_by_celery = popped(celery_queue)
    queue.send_run(run_id)
    sent_lean = popped(celery_queue)
    assert sent_lean["properties"]["delivery_info"]["routing_key"] == celery_queue
    assert sent_lean["headers"]["timelimit"] == ([900, 870] if registered else [None, None])
    assert without_ids(sent_lean) == without_ids(sent_by_celery)
    # And two messages never share an id (a worker's ack names the delivery tag).
    queue.send_run(run_id)
    queue.send_run(run_id)
    first, second = popped(celery_queue), popped(celery_queue)
    assert first["headers"]["id"] != second["headers"]["id"]
    assert first["properties"]["delivery_tag"] != second["properties"]["delivery_tag"]


@pytest.mark.parametrize(
    "setting, value",
    [
        ("task_routes", {"runs.execute": {"queue": "elsewhere"}}),
        ("task_always_eager", True),
        ("broker_transport_options", {"visibility_timeout": 3600, "global_keyprefix": "shared:"}),
        ("broker_use_ssl", {"ssl_cert_reqs": "required"}),
        ("broker_write_url", "redis://127.0.0.1:6379/9"),
        ("broker_url", "rediss://127.0.0.1:6379/9"),
    ],
)
def test_anything_the_lean_message_does_not_know_goes_through_send_task(setting, value, monkeypatch):
    monkeypatch.setitem(app.conf, setting, value)
    assert not broker.lean_possible(app)
    sent: list[Any] = []
    monkeypatch.setattr(app, "send_task", lambda *args, **kwargs: sent.append((args, kwargs)))
    queue.send_run("run_01jh2m4c6kx8t3v5n7q9s1w3y5")
    assert sent == [
        (
            ("runs.execute",),
            {
                "args": ("run_01jh2m4c6kx8t3v5n7q9s1w3y5",),
                "argsrepr": "('run_01jh2m4c6kx8t3v5n7q9s1w3y5',)",
                "kwargsrepr": "{}",
            },
        )
    ]


def test_a_publish_signal_receiver_or_a_task_sending_goes_through_send_task(monkeypatch):
    from celery import signals

    def receiver(**kwargs: Any) -> None:
        pass

    signals.before_task_publish.connect(receiver)
    try:
        assert not broker.lean_possible(app)
    finally:
        signals.before_task_publish.disconnect(receiver)
    assert broker.lean_possible(app)
    monkeypatch.setattr(type(app), "current_worker_task", property(lambda self: object()))
    assert not broker.lean_possible(app)  # the sweeper's resend: Celery records the task's lineage


def test_a_task_with_options_the_lean_message_lacks_goes_through_send_task(monkeypatch):
    import runs.tasks  # noqa: F401

    app.finalize()
    task = app._tasks[queue.EXECUTE_TASK]
    monkeypatch.setattr(task, "_exec_options", {**task._get_exec_options(), "priority": 5})
    assert not broker.send_lean(app, queue.EXECUTE_TASK, ("run_x",), "('run_x',)")
    sent: list[Any] = []
    monkeypatch.setattr(app, "send_task", lambda *args, **kwargs: sent.append(args))
    queue.send_run("run_01jh2m4c6kx8t3v5n7q9s1w3y5")
    assert sent == [("runs.execute",)]


def test_the_runs_waiting_on_the_queue_are_read_from_every_priority_list(celery_queue):
    assert queue.runs_waiting() == set()
    queue.send_run("run_a")
    app.send_task(queue.EXECUTE_TASK, args=("run_b",), priority=6)  # kombu's list of priority 6
    app.send_task("hooks.deliver", args=("run_c",))  # another task: names no run
    assert queue.runs_waiting() == {"run_a", "run_b"}
    # More waiting than it will read: it can't tell (the sweeper then keeps to KAGENT_RUN_RESEND_SECONDS).
    assert broker.waiting_arguments(app, queue.EXECUTE_TASK, limit=2) is None
    client = redis.Redis.from_url(app.conf.broker_url)
    client.lpush(celery_queue, b"not json")
    client.delete(celery_queue + "\x06\x166")
    assert queue.runs_waiting() == {"run_a"}  # what isn't a task message is skipped


def test_a_queue_it_cannot_read_is_none(celery_queue):
    queue.send_run("run_a")
    previous, app.conf.task_routes = app.conf.task_routes, {queue.EXECUTE_TASK: {"queue": "elsewhere"}}
    try:
        assert queue.runs_waiting() is None  # the runs' messages may be on another queue
    finally:
        app.conf.task_routes = previous
    assert queue.runs_waiting() == {"run_a"}


def test_whether_the_lean_message_may_go_follows_the_configuration_as_it_changes(settings):
    """What `lean_possible` knows of the configuration is kept between runs, and forgotten when it changes: a
    setting of the app's, or Django's settings under which Celery reads its own."""
    assert broker.lean_possible(app)
    app.conf.task_always_eager = True
    try:
        assert not broker.lean_possible(app)
    finally:
        del app.conf["task_always_eager"]
    assert broker.lean_possible(app)
    settings.CELERY_TASK_DEFAULT_PRIORITY = 5
    assert not broker.lean_possible(app)
    del settings.CELERY_TASK_DEFAULT_PRIORITY
    assert broker.lean_possible(app)


def test_a_run_message_a_worker_holds_has_no_copy_in_redis_and_goes_back_from_memory(celery_queue):
    """kombu keeps a copy of every message a worker holds in Redis (its acknowledgement emulation: two transactions
    per task). A run's message is held in memory only — the sweeper recovers a run whose worker died — and still
    goes back to the queue when the task asks it (a child process lost) or the worker stops holding it."""
    client = redis.Redis.from_url(app.conf.broker_url)
    queue.send_run("run_01jh2m4c6kx8t3v5n7q9s1w3y5")
    app.send_task("runs.sweep")  # a task that isn't swept: kombu's copy as usual
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

            queue.send_run("run_01jh2m4c6kx8t3v5n7q9s1w3y6")
            held = channel.basic_get(celery_queue)
            assert held.delivery_tag.encode() not in client.hkeys(channel.unacked_key)
            channel.qos.restore_unacked()  # the worker stops
            assert json.loads(base64.b64decode(popped(celery_queue)["body"]))[0] == ["run_01jh2m4c6kx8t3v5n7q9s1w3y6"]

            queue.send_run("run_01jh2m4c6kx8t3v5n7q9s1w3y7")
            done = channel.basic_get(celery_queue)
            channel.basic_ack(done.delivery_tag)
            channel.qos.restore_unacked()
            assert client.llen(celery_queue) == 0  # an acknowledged message doesn't come back
        finally:
            channel.close()


def test_whether_the_lean_message_may_go_is_answered_before_the_app_has_read_its_configuration(settings):
    """A process's first run (a web worker just started) asks `lean_possible` of an app that hasn't read its
    configuration yet: Celery's `conf.changes` is then a placeholder that reads the whole configuration, Django's
    settings included, when iterated; the answer must be the configured app's all the same."""
    from celery import Celery

    fresh = Celery("kagent")
    fresh.config_from_object("django.conf:settings", namespace="CELERY")
    settings.CELERY_TASK_ALWAYS_EAGER = False  # under overridden settings, as in any test
    assert not fresh.configured
    assert broker.lean_possible(fresh) is broker.lean_possible(app) is True
    fresh.conf.task_always_eager = True
    assert not broker.lean_possible(fresh)


def test_a_run_message_still_held_when_the_worker_closes_its_channel_goes_back_to_the_queue(celery_queue):
    """A worker's shutdown (warm or cold) closes its channel, and kombu restores what it still holds
    (`restore_unacked_once`, after flushing what was acknowledged): a held run's message from memory, once; an
    acknowledged one not at all."""
    queue.send_run("run_01jh2m4c6kx8t3v5n7q9s1w3y8")
    queue.send_run("run_01jh2m4c6kx8t3v5n7q9s1w3y9")
    with app.connection_for_read() as connection:
        channel = connection.channel()
        held, done = channel.basic_get(celery_queue), channel.basic_get(celery_queue)
        channel.basic_ack(done.delivery_tag)
        channel.close()
        channel.close()
    back = popped(celery_queue)
    assert back["headers"]["redelivered"] is True and back["properties"]["delivery_tag"] == held.delivery_tag
    assert json.loads(base64.b64decode(back["body"]))[0] == ["run_01jh2m4c6kx8t3v5n7q9s1w3y8"]
    assert redis.Redis.from_url(app.conf.broker_url).llen(celery_queue) == 0
