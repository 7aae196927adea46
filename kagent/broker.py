"""The Redis broker: kombu's transport with one Redis client object per channel, and `send`, the one way the
product queues a task.

kombu's Redis channel builds a new `redis.Redis` client — and its table of some 170 response callbacks — for every
message it sends (`conn_or_acquire` → `_create_client`); that was most of the CPU of enqueueing a run. The client
is only a handle on the channel's connection pool and is thread-safe, so one per channel does the same work.
Selected in settings (`CELERY_BROKER_TRANSPORT`, by the alias `kagent` that kagent/celery.py registers).

`send` puts what `app.send_task` would send on the default queue, made without the producer around it (its pool,
routing, entity declaration and retry wrapper cost three times the message itself on every run, measured in
bench/runs_bench.py): the headers and body come from Celery's own builder (`amqp.as_task_v2`), the envelope is
kombu's Redis transport's (`prepare_message`, `basic_publish`, `_put`), and one LPUSH puts it on the queue. A test
keeps it equal to what `send_task` sends, field for field; the worker reads it as any task. (Celery beat sends its
scheduled tasks itself, through kombu.)
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property, lru_cache
from typing import Any, cast

import redis as redis_py
from django.conf import settings
from django.db import transaction
from kombu.serialization import dumps as serialize
from kombu.transport import redis, virtual

from kagent.celery import app

logger = logging.getLogger(__name__)

# The tasks whose message a worker holds in memory only (kombu's acknowledgement emulation keeps no copy in Redis):
# their work is in PostgreSQL and the sweeper recovers it — a run still queued whose message is not waiting on
# the queue is sent again after KAGENT_RUN_RESEND_MISSING_SECONDS, a claimed run whose lease ran out is queued again.
# The copy cost the worker two Redis transactions per task (a tenth of a run's CPU in the worker) and, for a worker
# SIGKILLed, only brought the message back after the visibility timeout, an hour later, long after the sweeper.
SWEPT_TASKS = frozenset({"runs.execute"})


class QoS(redis.QoS):
    """kombu's Redis acknowledgement emulation, except for the messages of SWEPT_TASKS: those are held in memory
    only. What kombu does with a held message is kept: taken back to the queue when the task asks it (a child
    process lost, `reject_on_worker_lost`) and when the worker stops (`restore_unacked`), from memory."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_memory: set[Any] = set()  # the delivery tags of the swept messages held, not yet acknowledged

    def append(self, message: Any, delivery_tag: Any) -> None:
        if (message.headers or {}).get("task") in SWEPT_TASKS:
            self._in_memory.add(delivery_tag)
            virtual.QoS.append(self, message, delivery_tag)
        else:
            super().append(message, delivery_tag)

    def ack(self, delivery_tag: Any) -> None:
        if delivery_tag in self._in_memory:
            self._in_memory.discard(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)
        else:
            super().ack(delivery_tag)

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        if delivery_tag in self._in_memory:
            if requeue:
                self.restore_by_tag(delivery_tag, leftmost=True)
            self._in_memory.discard(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)
        else:
            super().reject(delivery_tag, requeue)

    def restore_by_tag(self, tag: Any, client: Any = None, leftmost: bool = False) -> None:
        if tag not in self._in_memory:
            super().restore_by_tag(tag, client, leftmost)
            return
        message = (self._delivered or {}).get(tag)
        if message is None:
            return
        delivery, channel = message.delivery_info, cast(Channel, self.channel)
        with channel.conn_or_acquire(client) as connected:
            pipe = connected.pipeline()
            restore = channel._do_restore_message  # type: ignore[attr-defined]  # not in kombu's stubs
            restore(message._raw, delivery["exchange"], delivery["routing_key"], pipe, leftmost)
            pipe.execute()

    def restore_unacked(self, client: Any = None) -> None:
        super().restore_unacked(client)
        self._in_memory.clear()


class Channel(redis.Channel):
    QoS = QoS

    @cached_property
    def _publishing_client(self) -> Any:
        return self._create_client()  # type: ignore[attr-defined]  # not in kombu's type stubs

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        yield client or self._publishing_client


class Transport(redis.Transport):
    Channel = Channel


PUBLISH_TIMEOUT_S = 5.0


@lru_cache(maxsize=4)
def _client(url: str) -> Any:
    # Thread-safe, and its pool reconnects after a fork by itself.
    return redis_py.Redis.from_url(url, socket_timeout=PUBLISH_TIMEOUT_S, socket_connect_timeout=PUBLISH_TIMEOUT_S)


def _task_limits(name: str) -> tuple[Any, Any]:
    """What `send_task` takes from the task itself when this process has it registered (the app finalized): its
    time limits, which go into the message's headers. A task with an option the message doesn't carry (a queue, a
    route, a priority, an expiry, another serializer) is a mistake in this code base: refused."""
    # As send_task looks: the registry itself, without finalizing the app (not in celery-types' stubs).
    task = app._tasks.get(name)  # type: ignore[attr-defined]
    if task is None:
        return None, None
    options = {key: value for key, value in task._get_exec_options().items() if value is not None}
    time_limit, soft_time_limit = options.pop("time_limit", None), options.pop("soft_time_limit", None)
    if options.pop("serializer", "json") != "json" or options:
        raise ValueError(f"task {name} has options kagent.broker.send doesn't carry: {sorted(options)}")
    return time_limit, soft_time_limit


def enqueue(name: str, *args: str, countdown: float | None = None) -> None:
    """The one way the product queues a task: task `name` with `args` (ids), sent once the current transaction
    commits (at once outside one), so a worker never looks for a row it can't see yet.

    It never fails its caller: what was committed stays committed, and with the broker out of reach (Redis
    restarting) the request still answers with it — an error would make the app try again and do the work twice.
    Every task's work is a row in PostgreSQL that a sweep finds and queues again: a run still queued
    (`runs.sweep`, after KAGENT_RUN_RESEND_SECONDS), an event not dispatched and a delivery due (`hooks.sweep`), an
    API knowledge source due (`agents.knowledge_refresh_due`), a check run that stopped (`checks.sweep`)."""
    transaction.on_commit(lambda: _send_or_log(name, args, countdown))


def _send_or_log(name: str, args: tuple[str, ...], countdown: float | None) -> None:
    try:
        send(name, *args, countdown=countdown)
    except Exception:
        logger.warning("%s %s: the broker is out of reach; its sweep will queue it again", name, args, exc_info=True)


def send(name: str, *args: str, countdown: float | None = None) -> None:
    """Queues task `name` with `args` (ids) on the default queue, `countdown` seconds from now: the one way the
    product sends a task. The message is Celery's own (headers and body from `app.amqp.as_task_v2`, as `send_task`
    makes them; the envelope kombu's Redis transport puts around them), put on the queue in one LPUSH without
    kombu's producer, whose pool, routing, entity declaration and retry wrapper cost three times the message itself
    on every run (bench/runs_bench.py). Raises what Redis raises: the product calls it through `enqueue`."""
    time_limit, soft_time_limit = _task_limits(name)
    queue = app.conf.task_default_queue
    argsrepr = repr(args)  # given, so Celery needn't build it with its safe repr
    parent = app.current_worker_task  # a task sent by a task (the sweeper's): its lineage, as send_task records it
    parent_id = parent.request.id if parent is not None else None
    root_id = (parent.request.root_id or parent_id) if parent is not None else None
    headers, properties, body, _ = app.amqp.as_task_v2(
        str(uuid.uuid4()),
        name,
        args,
        {},
        countdown=countdown,
        argsrepr=argsrepr,
        kwargsrepr="{}",
        reply_to=app.thread_oid,
        time_limit=time_limit,
        soft_time_limit=soft_time_limit,
        root_id=root_id,
        parent_id=parent_id,
        ignore_result=None,  # type: ignore[arg-type]  # send_task passes None: not given
    )
    content_type, content_encoding, data = serialize(body, serializer="json")
    raw = data.encode() if isinstance(data, str) else data
    message = {
        "body": base64.b64encode(raw).decode(),
        "content-encoding": content_encoding,
        "content-type": content_type,
        "headers": headers,
        "properties": {
            **properties,
            "argsrepr": argsrepr,
            "kwargsrepr": "{}",
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }
    _client(settings.REDIS_URL).lpush(queue, json.dumps(message))


def waiting_arguments(name: str, *, limit: int = 5000) -> set[str] | None:
    """The first argument of every message of task `name` waiting on the default queue (each of its priority lists),
    not yet taken by a worker; None when that can't be told: more than `limit` messages waiting, Redis out of
    reach. (The sweeper's test of a run's message being lost: see runs.lifecycle.run_sweep.)"""
    queue = app.conf.task_default_queue
    lists = [queue] + [f"{queue}{redis.Channel.sep}{step}" for step in redis.PRIORITY_STEPS if step]
    try:
        client = _client(settings.REDIS_URL)
        lengths = client.pipeline(transaction=False)
        for key in lists:
            lengths.llen(key)
        if sum(lengths.execute()) > limit:
            return None
        contents = client.pipeline(transaction=False)
        for key in lists:
            contents.lrange(key, 0, limit)
        raws = [raw for listed in contents.execute() for raw in listed]
    except redis_py.RedisError:
        return None
    found = set()
    for raw in raws:
        try:
            message = json.loads(raw)
            if message["headers"]["task"] != name:
                continue
            body = message["body"]
            if message["properties"].get("body_encoding") == "base64":
                body = base64.b64decode(body)
            args = json.loads(body)[0]
        except (ValueError, KeyError, TypeError, IndexError):
            continue  # not a message of ours: it names no run
        if args and isinstance(args[0], str):
            found.add(args[0])
    return found
