"""A run's events as Server-Sent Events: what was missed since Last-Event-ID, then each event as it is written, a
keep-alive comment every 15 s, and the end after a terminal event or `run.requires_action`. A stream (or a wait)
subscribes, says that it follows the run (`run_events.follow`: the engine wakes only followed runs), then looks.
A conversation's events (`GET /v1/sessions/{id}/events`) go the same way (`SessionSource`), until the time limit.

One loop (`_loop`, its steps), driven two ways: a generator for WSGI servers (`bin/run`'s development server,
gunicorn; it holds a thread while it streams) and an async generator for the ASGI server (`uvicorn
kagent.asgi:application`, which serves `/v1/runs/{id}/events` in production without a thread per stream: see
docker-compose.yml). Woken by the
engine's notifications on Redis pub/sub.

Each API key (a publishable key: each client address) may hold KAGENT_STREAMS_PER_KEY streams open at once (a
sorted set of open streams in Redis, each refreshed with its keep-alive, so a stream whose server died stops counting
within a minute); the slot is given back when the server closes the response. A `store: false` run's content is
purged (`on_end`) once its last event was written to the client.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections, connection
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone

from conversations import session_events
from kagent.clients import client_address
from kagent.errors import OUTAGES
from kagent.models import ApiKey
from kagent.pubsub import Event, redis_client
from kagent.throttle import RateLimited
from runs import run_events
from runs.models import Run
from runs.services import run_purge

KEEPALIVE_S = 15.0
FOLLOW_S = KEEPALIVE_S * 4  # a stream says it follows its run for this long, and again every KEEPALIVE_S
WAIT_MARGIN_S = 5.0  # a wait follows its run this much longer than it waits
MAX_STREAM_S = 600.0  # then the stream ends; a client resumes with Last-Event-ID
MAX_WSGI_STREAM_S = 120.0  # a WSGI server's stream holds a thread: shorter, resumed the same way
OPEN_TTL_S = 60
RETRY_MS = 2000
SETTLED = frozenset({*Run.TERMINAL, Run.Status.REQUIRES_ACTION})


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
            run_events.logger.warning("could not release a slot of %s", self.name, exc_info=True)


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


def _settled(run_id: str) -> bool:
    status = Run.objects.filter(pk=run_id).values_list("status", flat=True).first()
    return status is None or status in SETTLED


def owner_of(request: HttpRequest, key: ApiKey) -> str:
    """Whose places a stream or a wait takes: a secret key's own (the business's server), and for a publishable key
    each client address's own — every visitor of the business's site uses that key, and anyone can copy it from
    the page, so one place-holder must not take the places of all the others."""
    if key.is_secret:
        return f"key:{key.pk}"
    return f"key:{key.pk}:{client_address(request)}"


def _follow_unless(run_id: str, followed_until: datetime | None, seconds: float, needed: float) -> None:
    """Follows the run for `seconds` unless its row (as read with the run) says it is followed for the `needed`
    seconds to come already: it was made followed for this request (`wait`, `"stream": true`)."""
    if followed_until is None or followed_until < timezone.now() + timedelta(seconds=needed):
        run_events.follow(run_id, seconds)


def _release_connection() -> None:
    """Gives the thread's database connection back to the process's pool while it waits on Redis (a wait or a stream
    served by a WSGI thread can last minutes; the next look takes one again)."""
    if not connection.in_atomic_block:
        connection.close()


def wait_settled(run_id: str, owner: str, seconds: float, *, followed_until: datetime | None = None) -> bool:
    """`POST /v1/runs` with `wait`: up to `seconds` for the run to end or pause, woken by its events (and looking at
    least every second). False when it didn't, or when there was no place to wait: KAGENT_WAITS_PER_KEY for the key,
    KAGENT_WAIT_THREADS for this process. `followed_until`: the run's, as the caller read it (a run made with
    `wait` is followed from its INSERT on; see runs/run_events.py). The caller answers with the run as it is either
    way — also when Redis or the database failed while waiting: the run is committed by then, and an error answer
    (503) would have the app create it again."""
    permit = ThreadPermit()
    if not permit.try_take():
        return False
    slot = KeySlot(owner, "waits", int(getattr(settings, "KAGENT_WAITS_PER_KEY", 10)))
    subscription = None
    try:
        if not slot.try_take():
            return False
        deadline = time.monotonic() + seconds
        subscription = redis_client().pubsub(ignore_subscribe_messages=True)
        subscription.subscribe(run_events.channel(run_id))  # before looking: no event is missed in between
        _follow_unless(run_id, followed_until, seconds + WAIT_MARGIN_S, needed=seconds)
        while True:
            if _settled(run_id):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _release_connection()
            subscription.get_message(timeout=min(left, 1.0))
    except OUTAGES:
        run_events.logger.warning(
            "a wait on %s ended early: redis or the database is out of reach", run_id, exc_info=True
        )
        return False
    finally:
        if subscription is not None:
            try:
                subscription.close()
            except OUTAGES:
                pass
        slot.release()
        permit.release()


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


@dataclass
class RunSource:
    run_id: str
    full_steps: bool
    followed_until: datetime | None = None

    @property
    def channel(self) -> str:
        return run_events.channel(self.run_id)

    def next(self, after: int) -> tuple[list[Event], bool]:
        """The events after `after`, and whether none will ever come (a run that ended writes its last event with
        its status: a client that resumes after it gets an empty stream that ends at once, not one that waits)."""
        # The status is looked at first: a run's last event is written in the transaction that ends it, so when the
        # run had ended by then, the look at the events after it finds that event. (The other order misses it when
        # the run ends between the two looks: no new event yet, then "ended", and the stream closed without its last
        # event.)
        ended = not Run.objects.filter(pk=self.run_id).exclude(status__in=Run.TERMINAL).exists()
        batch = run_events.after(self.run_id, after, full_steps=self.full_steps)
        if batch:
            return batch, False
        return [], ended

    def follow(self, *, first: bool) -> None:
        if first:  # a run made followed for this request needs no write of its own
            _follow_unless(self.run_id, self.followed_until, FOLLOW_S, needed=FOLLOW_S - KEEPALIVE_S)
        else:  # however busy the stream: its mark must not run out
            run_events.follow(self.run_id, FOLLOW_S)


@dataclass
class SessionSource:
    """A conversation's events: every one of them wakes its streams (conversations/session_events.py); a
    conversation never ends for good (a closed one opens again), so its stream ends only by its time limit."""

    session_id: str

    @property
    def channel(self) -> str:
        return session_events.channel(self.session_id)

    def next(self, after: int) -> tuple[list[Event], bool]:
        return session_events.after(self.session_id, after), False

    def follow(self, *, first: bool) -> None:
        pass


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
                _release_connection()
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


def event_stream(run: Run, places: StreamPlaces, *, after: int, full_steps: bool) -> HttpResponseBase:
    """The run's events from `after` on, as Server-Sent Events; a `store: false` run's content is deleted once the
    stream delivered its end, as when its result is read. Resuming after the last event of a run that ended answers
    204 No Content: the one answer that tells a browser's EventSource to stop reconnecting (an empty 200 stream
    would be reopened every few seconds for as long as the page stays open)."""
    run_id, store = run.pk, run.store
    try:
        finished = run.status in Run.TERMINAL and run_events.last_id(run_id) <= after
    except BaseException:  # nothing holds the places yet: give them back, or this process loses a thread for good
        places.release()
        raise
    if finished:
        places.release()
        return HttpResponse(status=204)

    def purge_if_delivered() -> None:
        if not store:
            ended = Run.objects.filter(pk=run_id, status__in=Run.TERMINAL, purged_at__isnull=True).first()
            if ended is not None:
                run_purge(run=ended)

    return _response(RunSource(run_id, full_steps, run.followed_until), places, after=after, on_end=purge_if_delivered)


def session_event_stream(session_id: str, places: StreamPlaces, *, after: int) -> HttpResponseBase:
    """The conversation's events from `after` on, as Server-Sent Events (SPEC §4 "Live handoff")."""
    return _response(SessionSource(session_id), places, after=after)


def _response(
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
