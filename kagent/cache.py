"""The Redis cache: Django's, keeping one `redis.Redis` client per connection pool.

Django's Redis cache builds a new `redis.Redis` (with its table of some 170 response callbacks) for every operation;
the request limits (kagent/throttle.py) make two or three of them on every API request. The client is only a handle
on its pool, thread-safe, and the pool reconnects after a fork by itself, so one per pool does the same work.
The cache of every process (settings' CACHES, on REDIS_URL).
"""

from __future__ import annotations

from collections.abc import Sequence
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
        self._count_script: Any = None  # redis-py's Script: EVALSHA, loaded again after a restart of Redis

    def count(self, keys: Sequence[str], limits: Sequence[int], *, timeout: int) -> int:
        """One more on each of the counters `keys` in turn, stopping at the first that goes over its limit: its
        position (1, 2, …), or 0 when none did. A counter is made with its expiry (`timeout` seconds from its first
        count), so it is never left without one. One round trip, atomic (a script: SET NX EX, then INCR, for each):
        concurrent requests never both take the last slot, and what an earlier counter refused is not counted on the
        later ones (a visitor held by their own limit doesn't spend the allowance of everyone behind a key)."""
        names = [self.make_and_validate_key(key) for key in keys]
        if self._count_script is None:
            client = self._cache.get_client(names[0], write=True)  # type: ignore[attr-defined]
            self._count_script = client.register_script(_COUNT)
        return int(self._count_script(keys=names, args=[timeout, *limits]))


# KEYS: the counters; ARGV[1]: their expiry in seconds, ARGV[1 + i]: the limit of KEYS[i].
_COUNT = """
for i, name in ipairs(KEYS) do
  redis.call('SET', name, 0, 'EX', ARGV[1], 'NX')
  if redis.call('INCR', name) > tonumber(ARGV[i + 1]) then
    return i
  end
end
return 0
"""
