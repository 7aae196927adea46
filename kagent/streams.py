"""Server-Sent Events, once for every stream (a run's events: runs/streams.py; a conversation's:
conversations/session_events.py): what was missed since Last-Event-ID, then each event as it is written, a keep-alive
comment every 15 s, and the end after an event that closes the stream or the time limit. A stream subscribes to its
source's channel, says that it follows it (`Source.follow`), then looks.

One loop (`_loop`, its steps), driven two ways: a generator for WSGI servers (`bin/run`'s development server,
gunicorn; it holds a thread while it streams) and an async generator for the ASGI server (`uvicorn
kagent.asgi:application`, which serves the event streams in production without a thread per stream: see
docker-compose.yml). Woken by notifications on Redis pub/sub (kagent/pubsub.py).

Each API key (a publishable key: each client address) may hold KAGENT_STREAMS_PER_KEY streams open at once (a
sorted set of open streams in Redis, each refreshed with its keep-alive, so a stream whose server died stops counting
within a minute); the slot is given back when the server closes the response. `EventStreamApi` is the base of every
stream's API operation.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections, connection
from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.utils import OpenApiParameter
from rest_framework import renderers
from rest_framework.request import Request
from rest_framework.response import Response

from kagent.api import ProjectApi
from kagent.clients import client_address
from kagent.models import ApiKey
from kagent.pubsub import Event, redis_client
from kagent.throttle import RateLimited

logger = logging.getLogger(__name__)

KEEPALIVE_S = 15.0
MAX_STREAM_S = 600.0  # then the stream ends; a client resumes with Last-Event-ID
MAX_WSGI_STREAM_S = 120.0  # a WSGI server's stream holds a thread: shorter, resumed the same way
OPEN_TTL_S = 60
RETRY_MS = 2000


class KeySlot:
    """One place among what an API key (or a dashboard member) holds open at once (`kind`: event streams, waits), in
    a Redis sorted set of open places, each refreshed while it is held, so a place whose server died stops counting
    within a minute. `owner`: `key:<id>` or `member:<id>`."""

    def __init__(self, owner: str, kind: str, limit: int) -> None:
        self.name = f"kagent:{kind}:{owner}"
        self.limit = limit
        self.id = uuid.uuid4().hex

    def try_take(self) -> bool:
        client = redis_client()
        now = time.time()
        pipe = client.pipeline()
        pipe.zremrangebyscore(self.name, 0, now - OPEN_TTL_S)
        pipe.zadd(self.name, {self.id: now})
        pipe.zcard(self.name)
        pipe.expire(self.name, OPEN_TTL_S)
        if pipe.execute()[2] <= self.limit:
            return True
        client.zrem(self.name, self.id)
        return False

    def refresh(self) -> None:
        redis_client().zadd(self.name, {self.id: time.time()})

    def release(self) -> None:
        try:
            redis_client().zrem(self.name, self.id)
        except Exception:  # it stops counting within OPEN_TTL_S anyway
            logger.warning("could not release a slot of %s", self.name, exc_info=True)


class StreamSlot(KeySlot):
    def __init__(self, owner: str) -> None:
        super().__init__(owner, "streams", int(getattr(settings, "KAGENT_STREAMS_PER_KEY", 20)))

    def take(self) -> None:
        if not self.try_take():
            raise RateLimited(f"This key has {self.limit} event streams open already; close one first.", 5)


class ThreadPermit:
    """A WSGI server's threads that may wait on runs at once (KAGENT_WAIT_THREADS per process: `wait` and event
    streams served there), so waiting requests can never take every thread from the rest of the API."""

    _lock = threading.Lock()
    _semaphore: threading.BoundedSemaphore | None = None

    @classmethod
    def _get(cls) -> threading.BoundedSemaphore:
        with cls._lock:
            if cls._semaphore is None:
                cls._semaphore = threading.BoundedSemaphore(int(getattr(settings, "KAGENT_WAIT_THREADS", 8)))
            return cls._semaphore

    def __init__(self) -> None:
        self.held = False

    def try_take(self) -> bool:
        self.held = self._get().acquire(blocking=False)
        return self.held

    def release(self) -> None:
        if self.held:
            self.held = False
            self._get().release()


def owner_of(request: HttpRequest, key: ApiKey) -> str:
    """Whose places a stream or a wait takes: a secret key's own (the business's server), and for a publishable key
    each client address's own — every visitor of the business's site uses that key, and anyone can copy it from
    the page, so one place-holder must not take the places of all the others."""
    if key.is_secret:
        return f"key:{key.pk}"
    return f"key:{key.pk}:{client_address(request)}"


def release_connection() -> None:
    """Gives the thread's database connection back to the process's pool while it waits on Redis (a wait or a stream
    served by a WSGI thread can last minutes; the next look takes one again)."""
    if not connection.in_atomic_block:
        connection.close()


class _Content:
    """A stream's content for StreamingHttpResponse: the server closes it when the response ends (read to the end,
    the client gone, or never started), and that gives back what the stream held (its key's slot, its thread)."""

    def __init__(self, events: Any, *held: KeySlot | ThreadPermit) -> None:
        self.events = events
        self.held = held

    def close(self) -> None:
        try:
            if hasattr(self.events, "close"):
                self.events.close()
        finally:
            for place in self.held:
                place.release()


class Content(_Content):
    def __iter__(self) -> Iterator[bytes]:
        return iter(self.events)


class AsyncContent(_Content):
    def __aiter__(self) -> AsyncIterator[bytes]:
        return aiter(self.events)


def last_event_id(raw: str | None) -> int:
    """Last-Event-ID as the client sent it: our ids are integers; anything else starts from the beginning."""
    try:
        value = int(str(raw or "").strip())
    except ValueError:
        return 0
    return max(0, value)


def resume_after(request: HttpRequest) -> int:
    """Where a stream resumes: the `Last-Event-ID` header (an EventSource's reconnect), or `?last_event_id=` for
    clients that can't set headers."""
    return last_event_id(request.headers.get("Last-Event-ID") or request.GET.get("last_event_id"))


class Source(Protocol):
    """What a stream follows: a run's events or a conversation's. `next(after)`: the events after `after` and whether
    none will ever come; `follow()`: says it is followed (at the start and with every keep-alive)."""

    @property
    def channel(self) -> str: ...

    def next(self, after: int) -> tuple[list[Event], bool]: ...

    def follow(self, *, first: bool) -> None: ...


def _in_a_pool_thread(call: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        finally:
            close_old_connections()  # a pool thread's connection is closed when it gets old, as after a request

    return sync_to_async(run, thread_sensitive=False)


# --- the loop, once; a driver for each server ------------------------------------------------------------------
#
# `_loop` is the stream's logic as steps, without doing any of them: the WSGI driver (`stream`) does each in its
# thread, the ASGI one (`astream`) awaits each (the database's in a pool thread, Redis without one).


@dataclass(frozen=True)
class _Step:
    kind: str  # send (`data`) | fetch | follow (`first`) | wait | refresh | end
    data: bytes = b""
    first: bool = False


def _loop(max_s: float) -> Generator[_Step, Any, None]:
    """The steps of one stream; a `fetch` (the events after the last one sent) is answered with `(batch, finished)`
    through `send`. The first `follow` subscribes to the source's channel before it says so."""
    started = last_sent = time.monotonic()
    yield _Step("send", f"retry: {RETRY_MS}\n\n".encode())
    yield _Step("follow", first=True)
    followed_at = time.monotonic()
    while True:
        batch, finished = yield _Step("fetch")
        if finished:
            return
        for event in batch:
            yield _Step("send", event.sse())  # resumed once the server wrote it
            last_sent = time.monotonic()
            if event.closes:
                yield _Step("end")
                return
        if time.monotonic() - started > max_s:
            return
        yield _Step("wait")
        if time.monotonic() - followed_at >= KEEPALIVE_S:
            yield _Step("follow", first=False)
            followed_at = time.monotonic()
        if time.monotonic() - last_sent >= KEEPALIVE_S:
            yield _Step("send", b": keep-alive\n\n")
            yield _Step("refresh")
            last_sent = time.monotonic()


def stream(
    source: Source, *, after: int, slot: StreamSlot, on_end: Callable[[], None] | None = None
) -> Iterator[bytes]:
    """The WSGI form (ends after MAX_WSGI_STREAM_S; an EventSource reconnects by itself with Last-Event-ID)."""
    subscription: Any = None
    steps = _loop(MAX_WSGI_STREAM_S)
    answer: Any = None
    try:
        while True:
            try:
                step = steps.send(answer)
            except StopIteration:
                return
            answer = None
            if step.kind == "send":
                yield step.data
            elif step.kind == "fetch":
                answer = source.next(after)
                after = max([after, *(event.id for event in answer[0])])
            elif step.kind == "follow":
                if subscription is None:
                    subscription = redis_client().pubsub(ignore_subscribe_messages=True)
                    subscription.subscribe(source.channel)
                source.follow(first=step.first)
            elif step.kind == "wait":
                release_connection()
                subscription.get_message(timeout=KEEPALIVE_S)
            elif step.kind == "refresh":
                slot.refresh()
            elif step.kind == "end" and on_end is not None:
                on_end()
    finally:
        if subscription is not None:
            subscription.close()


async def astream(
    source: Source, *, after: int, slot: StreamSlot, on_end: Callable[[], None] | None = None
) -> AsyncIterator[bytes]:
    """The ASGI form: waits on Redis without holding a thread."""
    import redis.asyncio

    fetch = _in_a_pool_thread(source.next)
    follow = _in_a_pool_thread(source.follow)
    steps = _loop(MAX_STREAM_S)
    answer: Any = None
    client: Any = None
    subscription: Any = None
    try:
        while True:
            try:
                step = steps.send(answer)
            except StopIteration:
                return
            answer = None
            if step.kind == "send":
                yield step.data
            elif step.kind == "fetch":
                answer = await fetch(after)
                after = max([after, *(event.id for event in answer[0])])
            elif step.kind == "follow":
                if subscription is None:
                    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
                    subscription = client.pubsub(ignore_subscribe_messages=True)
                    await subscription.subscribe(source.channel)
                await follow(first=step.first)
            elif step.kind == "wait":
                await subscription.get_message(timeout=KEEPALIVE_S)
            elif step.kind == "refresh":
                await sync_to_async(slot.refresh, thread_sensitive=False)()
            elif step.kind == "end" and on_end is not None:
                await sync_to_async(on_end, thread_sensitive=False)()
    finally:
        if subscription is not None:
            await subscription.aclose()
        if client is not None:
            await client.aclose()


@dataclass
class StreamPlaces:
    """What an event stream holds while it is open: its owner's slot and, on a WSGI server, one of the threads that
    may wait. Taken before the run is created (`"stream": true`), so a refusal creates nothing."""

    slot: StreamSlot
    permit: ThreadPermit | None

    @classmethod
    def take(cls, request: HttpRequest, owner: str) -> StreamPlaces:
        slot = StreamSlot(owner)
        slot.take()
        # A DRF view's request wraps Django's: the server that received it is the wrapped one's class.
        if isinstance(getattr(request, "_request", request), ASGIRequest):
            return cls(slot, None)
        permit = ThreadPermit()
        if not permit.try_take():
            slot.release()
            raise RateLimited("This server holds all the event streams and waits it can; try again.", 2)
        return cls(slot, permit)

    def release(self) -> None:
        self.slot.release()
        if self.permit is not None:
            self.permit.release()


def response(
    source: Source, places: StreamPlaces, *, after: int, on_end: Callable[[], None] | None = None
) -> HttpResponseBase:
    content: Any
    if places.permit is None:
        content = AsyncContent(astream(source, after=after, slot=places.slot, on_end=on_end), places.slot)
    else:
        content = Content(stream(source, after=after, slot=places.slot, on_end=on_end), places.slot, places.permit)
    response = StreamingHttpResponse(content, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: don't buffer the stream
    return response


class EventStreamRenderer(renderers.BaseRenderer):
    """Lets a client ask for `text/event-stream`; the stream itself is a StreamingHttpResponse, and an error before
    it starts is the usual error JSON."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


class EventStreamApi(ProjectApi):
    """An event stream's operation (a run's, a conversation's): publishable keys allowed, Server-Sent Events or the
    error JSON. `opened` is where it resumes and the places it holds while open."""

    publishable_allowed = True
    renderer_classes = [renderers.JSONRenderer, EventStreamRenderer]
    PARAMETERS = [
        OpenApiParameter("Last-Event-ID", str, OpenApiParameter.HEADER, description="resume after this event"),
        OpenApiParameter("last_event_id", int, description="the same, for clients that can't set headers"),
    ]

    def handle_exception(self, exc: Exception) -> Response:
        # An error is the error JSON and says so, even to a client that asked for text/event-stream (found by the
        # fuzzer: a 404 went out labelled as an event stream).
        response = super().handle_exception(exc)
        self.request.accepted_renderer = renderers.JSONRenderer()
        self.request.accepted_media_type = "application/json"
        return response

    def opened(self, request: Request) -> tuple[int, StreamPlaces]:
        return resume_after(request), StreamPlaces.take(request, owner_of(request, self.api_key))
