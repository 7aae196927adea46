"""Request limits, counted in Redis (the cache, kagent/cache.py): how many
requests an API key may make a minute, how many runs a publishable key may start, how many failed sign-ins an
account or an address may have, how many requests with a key that isn't one an address may make. Fixed windows: at
most `limit` in each window, a refusal says when the next window starts (`Retry-After`).

A publishable key sits in the business's pages: every visitor holds it, and anyone can copy it. Its limits are each
visitor's (per client address, kagent.clients), under a ceiling for the key as a whole
(`KAGENT_PUBLISHABLE_CEILING_FACTOR` times a visitor's), so one visitor over their limit answers 429 to themselves,
never to the others. A secret key is the business's own server: one count per key.

Addresses are counted as `address_bucket` groups them: an IPv6 client by its /64 (what one subscriber is given), so
taking a new address from one's own block doesn't start a new count."""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
from collections.abc import Sequence
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
    refused = count_in_turn([(key, limit)], window_s=window_s)
    return None if refused is None else refused[1]


def count_in_turn(counters: Sequence[tuple[str, int]], *, window_s: int) -> tuple[int, int] | None:
    """Counts one more on each `(key, limit)` in turn, in one round trip, until one goes over its limit: None when
    none did, else (its position from 0, the seconds until the next window). The ones after it are not counted."""
    now = time.time()
    names, ends = [], now
    for key, _ in counters:
        name, ends = _window(key, window_s, now)
        names.append(name)
    backend = cast(RedisCache, caches[DEFAULT_CACHE_ALIAS])  # settings: the cache is always kagent.cache's
    over = backend.count(names, [limit for _, limit in counters], timeout=window_s + 5)
    return None if over == 0 else (over - 1, max(1, math.ceil(ends - now)))


def peek(key: str, *, window_s: int) -> int:
    """How many were counted for `key` in the current window."""
    cache_key, _ = _window(key, window_s, time.time())
    return int(cache.get(cache_key) or 0)


def clear(key: str, *, window_s: int) -> None:
    cache_key, _ = _window(key, window_s, time.time())
    cache.delete(cache_key)


def address_bucket(address: str) -> str:
    """What an address is counted as: an IPv4 address (also written IPv4-mapped) itself, an IPv6 address its /64."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def _publishable(key: ApiKey, what: str, *, per_visitor: int, address: str, verb: str) -> None:
    """A publishable key's count of `what` (requests, runs, messages): the visitor's own (`per_visitor` a minute),
    then the key's ceiling (all its visitors together); `verb` says what they did, in the refusal."""
    ceiling = per_visitor * settings.KAGENT_PUBLISHABLE_CEILING_FACTOR
    counters = [(f"{what}:{key.pk}:visitor:{address_bucket(address)}", per_visitor), (f"{what}:{key.pk}", ceiling)]
    refused = count_in_turn(counters, window_s=MINUTE)
    if refused is None:
        return
    which, wait = refused
    if which == 0:
        raise RateLimited(
            f"This address {verb} more than {per_visitor} {what} this minute with this key; try again in {wait} s.",
            wait,
        )
    raise RateLimited(
        f"This key's visitors together {verb} more than {ceiling} {what} this minute; try again in {wait} s.", wait
    )


def api_request(key: ApiKey, *, address: str) -> None:
    """An API key's requests a minute: the project's own limit for its kind of key, else the default; a publishable
    key's per visitor's address, under its ceiling."""
    project = key.project
    if key.is_secret:
        limit = project.api_rate_secret or settings.KAGENT_API_RATE_SECRET
        wait = count(f"api:{key.pk}", limit=limit, window_s=MINUTE)
        if wait is not None:
            raise RateLimited(f"This API key made more than {limit} requests this minute; try again in {wait} s.", wait)
        return
    per_visitor = project.api_rate_publishable or settings.KAGENT_API_RATE_PUBLISHABLE
    _publishable(key, "requests", per_visitor=per_visitor, address=address, verb="made")


def run_start(key: ApiKey, *, address: str) -> None:
    """Runs a publishable key may start a minute (each one spends on the model), per visitor's address under the
    key's ceiling; secret keys are the business's own server and are held by their request limit only."""
    if key.is_secret:
        return
    per_visitor = key.project.run_rate_publishable or settings.KAGENT_RUN_RATE_PUBLISHABLE
    _publishable(key, "runs", per_visitor=per_visitor, address=address, verb="started")


def customer_message(key: ApiKey, *, address: str) -> None:
    """A customer's messages written through a publishable key (to the team, during a live handoff): limited like
    the runs it may start, per visitor's address under the key's ceiling, on their own count."""
    if key.is_secret:
        return
    per_visitor = key.project.run_rate_publishable or settings.KAGENT_RUN_RATE_PUBLISHABLE
    _publishable(key, "messages", per_visitor=per_visitor, address=address, verb="wrote")


def authentication_failed(address: str) -> None:
    """A request with an `Authorization` header that names no usable key (malformed, unknown, revoked), from
    `address`: RateLimited once the address made more than KAGENT_AUTH_FAILURES of them this minute. Only failures
    are counted and only they are refused (a valid key is let in from any address): no key is guessed faster than
    that, and a shared address (a NAT, a proxy) where one client holds a wrong key keeps working for the others."""
    limit = settings.KAGENT_AUTH_FAILURES
    wait = count(f"auth-failures:{address_bucket(address)}", limit=limit, window_s=MINUTE)
    if wait is not None:
        raise RateLimited(
            f"Too many requests with an API key that isn't valid came from this address (more than {limit} this "
            f"minute). Check the key you send; try again in {wait} s.",
            wait,
        )


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


# --- mail: invitations and password resets ------------------------------------------------------------------------

HOUR = 60 * MINUTE
INVITATIONS_PER_HOUR = 50  # an organization's, to any addresses: mail sent in our name
RESET_REQUESTS_PER_ADDRESS = 10  # "Forgot your password?" asked from one client address
RESET_MAILS_PER_ACCOUNT = 3  # reset links mailed to one email address


def invitation_sent(organization_id: str) -> None:
    """Invitations an organization may send an hour (each one is a mail to an address its owners and admins pick)."""
    wait = count(f"invitations:{organization_id}", limit=INVITATIONS_PER_HOUR, window_s=HOUR)
    if wait is not None:
        minutes = max(1, round(wait / 60))
        raise RateLimited(
            f"This organization sent more than {INVITATIONS_PER_HOUR} invitations this hour; "
            f"try again in {minutes} minute{'s' if minutes != 1 else ''}.",
            wait,
        )


def password_reset_requested(address: str) -> int | None:
    """Counts a "forgot password" request from `address`: None while within RESET_REQUESTS_PER_ADDRESS an hour, else
    the seconds to wait. Counted whatever the email asked for, so the refusal tells nothing about any account; an
    IPv6 client by its /64 (`address_bucket`)."""
    return count(f"reset:address:{address_bucket(address)}", limit=RESET_REQUESTS_PER_ADDRESS, window_s=HOUR)


def password_reset_mail_allowed(email: str) -> bool:
    """Counts a reset link asked for `email` (whether or not it has an account): False over RESET_MAILS_PER_ACCOUNT an
    hour, when no mail is sent and the answer stays the same (one inbox isn't flooded, and nothing is told)."""
    account = hashlib.sha256(email.strip().lower().encode()).hexdigest()[:32]
    return count(f"reset:account:{account}", limit=RESET_MAILS_PER_ACCOUNT, window_s=HOUR) is None
