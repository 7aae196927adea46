"""The Redis cache: Django's, keeping one `redis.Redis` client per connection pool.

Django's Redis cache builds a new `redis.Redis` (with its table of some 170 response callbacks) for every operation;
the request limits (kagent/throttle.py) make two or three of them on every API request. The client is only a handle
on its pool, thread-safe, and the pool reconnects after a fork by itself, so one per pool does the same work.
The cache of every process (settings' CACHES, on REDIS_URL).
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends import redis


class RedisCacheClient(redis.RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[bool, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        client = self._clients.get(write)
        if client is None:
            pool = self._get_connection_pool(write)  # type: ignore[attr-defined]  # Django's, not in its stubs
            client = self._clients[write] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client


class RedisCache(redis.RedisCache):
    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient

    def count(self, key: str, *, timeout: int) -> int:
        """One more for `key`, which expires `timeout` seconds after its first count: the new count, in one round
        trip (in a MULTI: SET NX with the expiry makes the counter if there is none, then INCR; so a counter is never
        left without its expiry, on any Redis since 2.6.12)."""
        name = self.make_and_validate_key(key)
        pipe = self._cache.get_client(name, write=True).pipeline(transaction=True)  # type: ignore[attr-defined]
        pipe.set(name, 0, ex=timeout, nx=True)
        pipe.incr(name)
        return int(pipe.execute()[1])
