"""What the event streams share: the Redis client their wake-ups go through, and an event as a stream sends it.

A run's events (runs/run_events.py) and a conversation's (conversations/session_events.py) are rows read back in
order; a stream is woken on Redis pub/sub when one is written (kagent/streams.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings


def redis_client() -> Any:
    """A client of the Redis in settings (REDIS_URL), kept per URL (thread-safe; its pool reconnects after a fork)."""
    return _redis(settings.REDIS_URL)


@lru_cache(maxsize=1)
def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


@dataclass(frozen=True)
class Event:
    id: int
    type: str
    data: dict[str, Any]
    closes: bool = False  # the stream ends after it (a run's terminal event or pause; a conversation's never)

    def sse(self) -> bytes:
        payload = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        return f"id: {self.id}\nevent: {self.type}\ndata: {payload}\n\n".encode()
