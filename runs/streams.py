"""A run's events as Server-Sent Events (the stream itself: kagent/streams.py), ending after a terminal event or
`run.requires_action`; and `wait`, which waits for a run to end or pause. A stream (or a wait) subscribes, says that
it follows the run (`run_events.follow`: the engine wakes only followed runs), then looks. A `store: false` run's
content is purged (`on_end`) once its last event was written to the client.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone

from kagent import streams as sse
from kagent.errors import OUTAGES
from kagent.pubsub import Event, redis_client
from kagent.streams import KeySlot, StreamPlaces, ThreadPermit, release_connection, response
from runs import run_events
from runs.lifecycle import run_purge
from runs.models import Run

FOLLOW_S = sse.KEEPALIVE_S * 4  # a stream says it follows its run for this long, and again every KEEPALIVE_S
WAIT_MARGIN_S = 5.0  # a wait follows its run this much longer than it waits
SETTLED = frozenset({*Run.TERMINAL, Run.Status.REQUIRES_ACTION})


def _settled(run_id: str) -> bool:
    status = Run.objects.filter(pk=run_id).values_list("status", flat=True).first()
    return status is None or status in SETTLED


def _follow_unless(run_id: str, followed_until: datetime | None, seconds: float, needed: float) -> None:
    """Follows the run for `seconds` unless its row (as read with the run) says it is followed for the `needed`
    seconds to come already: it was made followed for this request (`wait`, `"stream": true`)."""
    if followed_until is None or followed_until < timezone.now() + timedelta(seconds=needed):
        run_events.follow(run_id, seconds)


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
            release_connection()
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
            _follow_unless(self.run_id, self.followed_until, FOLLOW_S, needed=FOLLOW_S - sse.KEEPALIVE_S)
        else:  # however busy the stream: its mark must not run out
            run_events.follow(self.run_id, FOLLOW_S)


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

    return response(RunSource(run_id, full_steps, run.followed_until), places, after=after, on_end=purge_if_delivered)
