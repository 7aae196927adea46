"""The Redis broker transport: kombu's, with one Redis client object per channel for publishing.

kombu's Redis channel builds a new `redis.Redis` client — and its table of some 170 response callbacks — for every
message it sends (`conn_or_acquire` → `_create_client`); that was most of the CPU of enqueueing a run. The client
is only a handle on the channel's connection pool and is thread-safe, so one per channel does the same work.
Selected in settings (`CELERY_BROKER_TRANSPORT`) when `REDIS_URL` is set.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any

from kombu.transport import redis


class Channel(redis.Channel):
    @cached_property
    def _publishing_client(self) -> Any:
        return self._create_client()  # type: ignore[attr-defined]  # not in kombu's type stubs

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        yield client or self._publishing_client


class Transport(redis.Transport):
    Channel = Channel
