"""Request limits, counted in Redis (the cache, kagent/cache.py): how many
requests an API key may make a minute, how many runs a publishable key may start, how many failed sign-ins an
account or an address may have. Fixed windows: at most `limit` in each window, a refusal says when the next
window starts (`Retry-After`)."""

from __future__ import annotations

import hashlib
import math
import time
from typing import cast

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches

from kagent.cache import RedisCache
from kagent.errors import ApiError
from kagent.models import ApiKey

MINUTE = 60


class RateLimited(ApiError):
    """429 `rate_limited`, with how long to wait."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(
            "rate_limited",
            message,
            status=429,
            details={"retry_after": retry_after},
            headers={"Retry-After": str(retry_after)},
        )
        self.retry_after = retry_after


def _window(key: str, window_s: int, now: float) -> tuple[str, float]:
    start = math.floor(now / window_s) * window_s
    return f"kagent:limit:{key}:{int(start)}", start + window_s


def count(key: str, *, limit: int, window_s: int) -> int | None:
    """Counts one more for `key` in the current window: None while within `limit`, else the seconds until the next
    window. (One round trip on every API request, atomic: concurrent requests never both take the last slot.)"""
    now = time.time()
    cache_key, ends = _window(key, window_s, now)
    backend = cast(RedisCache, caches[DEFAULT_CACHE_ALIAS])  # settings: the cache is always kagent.cache's
    used = backend.count(cache_key, timeout=window_s + 5)
    return None if used <= limit else max(1, math.ceil(ends - now))


def peek(key: str, *, window_s: int) -> int:
    """How many were counted for `key` in the current window."""
    cache_key, _ = _window(key, window_s, time.time())
    return int(cache.get(cache_key) or 0)


def clear(key: str, *, window_s: int) -> None:
    cache_key, _ = _window(key, window_s, time.time())
    cache.delete(cache_key)


def api_request(key: ApiKey) -> None:
    """An API key's requests a minute: the project's own limit for its kind of key, else the default."""
    project = key.project
    if key.is_secret:
        limit = project.api_rate_secret or settings.KAGENT_API_RATE_SECRET
    else:
        limit = project.api_rate_publishable or settings.KAGENT_API_RATE_PUBLISHABLE
    wait = count(f"api:{key.pk}", limit=limit, window_s=MINUTE)
    if wait is not None:
        raise RateLimited(f"This API key made more than {limit} requests this minute; try again in {wait} s.", wait)


def run_start(key: ApiKey) -> None:
    """Runs a publishable key may start a minute (each one spends on the model); secret keys are the business's
    own server and are held by their request limit only."""
    if key.is_secret:
        return
    limit = key.project.run_rate_publishable or settings.KAGENT_RUN_RATE_PUBLISHABLE
    wait = count(f"runs:{key.pk}", limit=limit, window_s=MINUTE)
    if wait is not None:
        raise RateLimited(f"This key started more than {limit} runs this minute; try again in {wait} s.", wait)


def customer_message(key: ApiKey) -> None:
    """A customer's messages written through a publishable key (to the team, during a live handoff): limited like
    the runs it may start, on their own count."""
    if key.is_secret:
        return
    limit = key.project.run_rate_publishable or settings.KAGENT_RUN_RATE_PUBLISHABLE
    wait = count(f"messages:{key.pk}", limit=limit, window_s=MINUTE)
    if wait is not None:
        raise RateLimited(f"This key wrote more than {limit} messages this minute; try again in {wait} s.", wait)


def dashboard_action(project_id: str, user_id: int) -> None:
    """What one member may do a minute in a project's dashboard that reaches outside or spends on the model: test
    panel messages, tool test calls, knowledge fetches, webhook redeliveries (the API's are held by its keys' limits;
    these go through no key)."""
    limit = settings.KAGENT_DASHBOARD_ACTIONS
    wait = count(f"dashboard:{project_id}:{user_id}", limit=limit, window_s=MINUTE)
    if wait is not None:
        raise RateLimited(
            f"You sent more than {limit} test messages, test calls, fetches and redeliveries this minute; "
            f"try again in {wait} s.",
            wait,
        )


SIGNIN_WINDOW = 15 * MINUTE


def _signin_counts(email: str, address: str) -> tuple[tuple[str, int], ...]:
    """What a failed sign-in counts against, with each one's limit: the account from this address, the address (one
    address trying many accounts), and the account from anywhere with a ceiling far above (so failures from one
    address never lock the account for its owner elsewhere, and many addresses still can't guess on for ever)."""
    account = hashlib.sha256(email.strip().lower().encode()).hexdigest()[:32]
    limit = settings.KAGENT_SIGNIN_FAILURES
    return (
        (f"signin:account:{account}:{address}", limit),
        (f"signin:address:{address}", limit),
        (f"signin:account:{account}", settings.KAGENT_SIGNIN_ACCOUNT_FAILURES),
    )


def signin_wait(email: str, address: str) -> int | None:
    """Seconds until another sign-in may be tried, when the account from this address, the address, or the account
    from everywhere failed too often recently — whether or not the account exists, so the answer tells nothing
    about it."""
    for key, limit in _signin_counts(email, address):
        if peek(key, window_s=SIGNIN_WINDOW) >= limit:
            _, ends = _window(key, SIGNIN_WINDOW, time.time())
            return max(1, math.ceil(ends - time.time()))
    return None


def signin_failed(email: str, address: str) -> None:
    for key, limit in _signin_counts(email, address):
        count(key, limit=limit, window_s=SIGNIN_WINDOW)


def signin_succeeded(email: str, address: str) -> None:
    """The account's counts start over (the address's doesn't: one address trying many accounts stays counted)."""
    this_address, _, everywhere = _signin_counts(email, address)
    for key, _limit in (this_address, everywhere):
        clear(key, window_s=SIGNIN_WINDOW)
