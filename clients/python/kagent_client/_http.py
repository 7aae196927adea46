"""Requests, and when one may be sent again.

Retries never duplicate a side effect. A request is sent again, after a backoff (or the server's `Retry-After`),
when:
- it is idempotent (GET, PUT, PATCH, DELETE, and the POSTs that change nothing twice: cancel, preview) and the
  server answered 429 or 5xx, or the connection failed in any way;
- it is `POST /v1/runs` with an `Idempotency-Key` (`runs.create` sends one with a secret key): as if idempotent,
  since the server answers a request sent again with the run the first one started;
- it has side effects (a POST such as `POST /v1/runs`) only when the server refused it before doing anything: 429,
  or a connection that was never made (connect error or timeout, no free connection). After a read timeout or a
  lost connection, or any 5xx (a 503 is an outage of the server's database or Redis, which can come after the run
  was committed), the POST may have been carried out: it is not sent again, and the error says so.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import httpx

from kagent_client._errors import ApiConnectionError, ApiError
from kagent_client._objects import KObject, Page

logger = logging.getLogger("kagent_client")

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})  # PATCH: JSON merge patch
NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class NotGiven:
    """A field left out of a request (None is sent as JSON null)."""

    _instance: NotGiven | None = None

    def __new__(cls) -> NotGiven:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = NotGiven()


def given(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if not isinstance(value, NotGiven)}


@dataclass(frozen=True)
class Request:
    method: str
    template: str  # the path as the OpenAPI document writes it: /v1/agents/{agent_id}
    path_params: Mapping[str, str | int] = field(default_factory=dict)
    params: Mapping[str, Any] | None = None
    json: Any = None
    headers: Mapping[str, str] | None = None
    idempotent: bool | None = None  # None: from the method

    @property
    def path(self) -> str:
        values = {name: quote(str(value), safe="") for name, value in self.path_params.items()}
        for name, value in values.items():
            if value in ("", ".", ".."):
                raise ValueError(f"{name} must not be empty, '.' or '..'")
        return self.template.format(**values)

    @property
    def retry_safe(self) -> bool:
        return self.idempotent if self.idempotent is not None else self.method in IDEMPOTENT_METHODS

    def query(self) -> dict[str, Any] | None:
        if not self.params:
            return None
        out: dict[str, Any] = {}
        for name, value in self.params.items():
            if value is None or isinstance(value, NotGiven):
                continue
            out[name] = ("true" if value else "false") if isinstance(value, bool) else value
        return out or None

    def with_params(self, **params: Any) -> Request:
        return Request(
            self.method,
            self.template,
            self.path_params,
            {**(self.params or {}), **params},
            self.json,
            self.headers,
            self.idempotent,
        )


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """`Retry-After` in seconds or as an HTTP date; None when absent or unreadable."""
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 2
    backoff_s: float = 0.5  # then doubled each time, with jitter
    max_backoff_s: float = 8.0
    max_retry_after_s: float = 60.0  # a longer Retry-After is an answer, not a wait

    def backoff(self, attempt: int) -> float:
        return float(min(self.max_backoff_s, self.backoff_s * 2.0**attempt) * (0.5 + random.random() / 2))

    def after_error(self, request: Request, attempt: int, error: Exception) -> float | None:
        """Seconds to wait before sending again after a transport error, or None: don't."""
        if attempt >= self.max_retries or not isinstance(error, httpx.TransportError):
            return None
        if isinstance(error, NEVER_SENT) or request.retry_safe:
            return self.backoff(attempt)
        return None

    def after_answer(self, request: Request, attempt: int, response: httpx.Response) -> float | None:
        """Seconds to wait before sending again after this answer, or None: don't."""
        status = response.status_code
        if attempt >= self.max_retries or not (status == 429 or status >= 500):
            return None
        retry_after = retry_after_seconds(response.headers)
        # Only a 429 says the request was refused before anything was done: a 503 (an outage of the server's
        # database or Redis) can come after a POST's work was committed, so such a POST is never sent again.
        if not (status == 429 or request.retry_safe):
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after_s else None
        return self.backoff(attempt)


def connection_error(request: Request, error: Exception) -> ApiConnectionError:
    reached = not isinstance(error, NEVER_SENT)
    note = ""
    if reached and not request.retry_safe:
        note = " It may have reached the server: look before sending it again."
    return ApiConnectionError(
        f"{request.method} {request.template}: {type(error).__name__}: {error}.{note}", may_have_reached_server=reached
    )


def _log_retry(request: Request, wait: float, why: str) -> None:
    logger.info("retrying %s %s in %.1f s (%s)", request.method, request.path, wait, why)


def parse_json(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return {}
    try:
        return response.json()
    except ValueError:
        raise ApiError(
            response.status_code, "invalid_response", "The server's answer is not JSON.", headers=response.headers
        ) from None


O_co = TypeVar("O_co", covariant=True)
L_co = TypeVar("L_co", covariant=True)
I_co = TypeVar("I_co", covariant=True)


class Requester(Protocol[O_co, L_co, I_co]):
    """What a resource needs: one object, one page, every object of a list (sync or async forms)."""

    def obj(self, request: Request) -> O_co: ...

    def page(self, request: Request) -> L_co: ...

    def iterate(self, request: Request) -> I_co: ...

    @property
    def secret_key(self) -> bool:
        """Whether the client holds a secret key (`ka_sk_…`)."""
        ...


class SyncRequester:
    def __init__(self, http: httpx.Client, policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep) -> None:
        self.http = http
        self.policy = policy
        self.sleep = sleep

    @property
    def secret_key(self) -> bool:
        return str(self.http.headers.get("Authorization", "")).startswith("Bearer ka_sk_")

    def _build(self, request: Request) -> httpx.Request:
        return self.http.build_request(
            request.method,
            request.path,
            params=request.query(),
            json=request.json if request.method not in ("GET", "DELETE") else None,
            headers=dict(request.headers or {}),
        )

    def send(self, request: Request, *, stream: bool = False) -> httpx.Response:
        """The answer to `request` after the retries it allows; an error answer raises ApiError (a streamed
        error answer is read first)."""
        attempt = 0
        while True:
            try:
                response = self.http.send(self._build(request), stream=stream)
            except httpx.TransportError as error:
                wait = self.policy.after_error(request, attempt, error)
                if wait is None:
                    raise connection_error(request, error) from error
                _log_retry(request, wait, type(error).__name__)
                self.sleep(wait)
                attempt += 1
                continue
            if response.status_code < 400:
                return response
            if stream:
                response.read()
                response.close()
            wait = self.policy.after_answer(request, attempt, response)
            if wait is None:
                raise ApiError.from_response(response)
            _log_retry(request, wait, f"HTTP {response.status_code}")
            self.sleep(wait)
            attempt += 1

    def json(self, request: Request) -> Any:
        return parse_json(self.send(request))

    def obj(self, request: Request) -> KObject:
        return KObject(self.json(request))

    def page(self, request: Request) -> Page:
        return Page(self.json(request))

    def iterate(self, request: Request) -> Iterator[KObject]:
        page = self.page(request)
        while True:
            yield from page.data
            if page.next is None:
                return
            page = self.page(request.with_params(cursor=page.next))


class AsyncRequester:
    def __init__(
        self,
        http: httpx.AsyncClient,
        policy: RetryPolicy,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.http = http
        self.policy = policy
        self.sleep = sleep

    @property
    def secret_key(self) -> bool:
        return str(self.http.headers.get("Authorization", "")).startswith("Bearer ka_sk_")

    def _build(self, request: Request) -> httpx.Request:
        return self.http.build_request(
            request.method,
            request.path,
            params=request.query(),
            json=request.json if request.method not in ("GET", "DELETE") else None,
            headers=dict(request.headers or {}),
        )

    async def send(self, request: Request, *, stream: bool = False) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = await self.http.send(self._build(request), stream=stream)
            except httpx.TransportError as error:
                wait = self.policy.after_error(request, attempt, error)
                if wait is None:
                    raise connection_error(request, error) from error
                _log_retry(request, wait, type(error).__name__)
                await self.sleep(wait)
                attempt += 1
                continue
            if response.status_code < 400:
                return response
            if stream:
                await response.aread()
                await response.aclose()
            wait = self.policy.after_answer(request, attempt, response)
            if wait is None:
                raise ApiError.from_response(response)
            _log_retry(request, wait, f"HTTP {response.status_code}")
            await self.sleep(wait)
            attempt += 1

    async def json(self, request: Request) -> Any:
        return parse_json(await self.send(request))

    async def obj(self, request: Request) -> KObject:
        return KObject(await self.json(request))

    async def page(self, request: Request) -> Page:
        return Page(await self.json(request))

    async def iterate(self, request: Request) -> AsyncIterator[KObject]:
        page = await self.page(request)
        while True:
            for item in page.data:
                yield item
            if page.next is None:
                return
            page = await self.page(request.with_params(cursor=page.next))
