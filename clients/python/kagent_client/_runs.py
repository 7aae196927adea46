"""What an app does with runs beyond single requests: wait for one to settle, answer its client-tool calls with
Python functions until it ends, and follow its events (Server-Sent Events, resumed with `Last-Event-ID` when a
stream ends before the run settled)."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Iterator, Mapping
from contextlib import aclosing, closing
from typing import Any

import httpx

from kagent_client._errors import ApiError
from kagent_client._http import NOT_GIVEN, AsyncRequester, Request, SyncRequester, connection_error
from kagent_client._objects import Answer, Event, KObject, Page
from kagent_client._resources import END_USER_TOKEN_HEADER, Runs, Sessions
from kagent_client._sse import SSEDecoder

TERMINAL = frozenset({"completed", "failed", "cancelled"})
SETTLED = TERMINAL | {"requires_action"}
CLOSING_EVENTS = frozenset({"run.completed", "run.failed", "run.cancelled", "run.requires_action"})
MAX_WAIT_S = 30  # the most `wait` the API takes
DEFAULT_RETRY_MS = 2000  # until the server says (its `retry:` field)
MAX_ERROR_MESSAGE = 300
MAX_OUTPUT_BYTES = 16 * 1024  # the API's limit for one client-tool output

ClientTool = Callable[..., Any]


class RunTimeout(ApiError):
    """The run did not settle within the time given (`run` is the run as last seen; it goes on)."""

    def __init__(self, run: KObject, seconds: float) -> None:
        super().__init__(0, "run_timeout", f"The run {run.get('id')} was still {run.get('status')} after {seconds} s.")
        self.run = run


class ClientToolFailed(Exception):
    pass


def _error_output(message: str) -> dict[str, Any]:
    return {"error": message[:MAX_ERROR_MESSAGE]}


def _output_for(call: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """The function's return value as the call's output; what the API would refuse for the whole submission (not
    JSON, over 16 KiB) is answered as this call's error instead, so the run goes on."""
    try:
        size = len(json.dumps(result, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        detail = f"{call['name']} returned {type(result).__name__}, which is not JSON."
        return {"call_id": call["call_id"], "output": _error_output(detail), "is_error": True}
    if size > MAX_OUTPUT_BYTES:
        detail = f"{call['name']} returned {size} bytes of JSON; a client tool's output is at most {MAX_OUTPUT_BYTES}."
        return {"call_id": call["call_id"], "output": _error_output(detail), "is_error": True}
    return {"call_id": call["call_id"], "output": result, "is_error": False}


def _failure(call: Mapping[str, Any], error: BaseException) -> dict[str, Any]:
    detail = f"{call['name']} failed: {type(error).__name__}: {error}".rstrip(": ")
    return {"call_id": call["call_id"], "output": _error_output(detail), "is_error": True}


def _unknown(call: Mapping[str, Any]) -> dict[str, Any]:
    detail = f"This app has no client tool named {call['name']!r}."
    return {"call_id": call["call_id"], "output": _error_output(detail), "is_error": True}


def _awaits_approval(run: KObject) -> bool:
    action = run.get("required_action") or {}
    return bool(action.get("type") == "approve_tool_calls")


def _calls(run: KObject) -> list[dict[str, Any]]:
    action = run.get("required_action") or {}
    return [dict(call) for call in action.get("tool_calls") or []]


def _arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments")
    return dict(arguments) if isinstance(arguments, Mapping) else {}


def _events_request(run_id: str, last_event_id: str | None, end_user_token: str | None) -> Request:
    return _stream_request("/v1/runs/{id}/events", run_id, last_event_id, end_user_token)


def _stream_request(path: str, object_id: str, last_event_id: str | None, end_user_token: str | None) -> Request:
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if last_event_id:
        headers["Last-Event-ID"] = last_event_id
    if end_user_token:
        headers[END_USER_TOKEN_HEADER] = end_user_token
    return Request("GET", path, path_params={"id": object_id}, headers=headers)


def _stream_create_request(fields: dict[str, Any]) -> Request:
    """POST /v1/runs with `"stream": true`: a POST with side effects, sent again only if refused before processing."""
    body = {name: value for name, value in {**fields, "stream": True}.items() if value is not NOT_GIVEN}
    return Request("POST", "/v1/runs", json=body, headers={"Accept": "text/event-stream"})


class _Follow:
    """Where a stream is: the last event id to resume after, the server's reconnection delay, failures in a row."""

    def __init__(self, last_event_id: str | None) -> None:
        self.last_event_id = last_event_id
        self.retry_ms = DEFAULT_RETRY_MS
        self.failures = 0
        self.decoder = SSEDecoder()

    def start(self) -> None:
        self.decoder = SSEDecoder()

    def events(self, chunk: bytes) -> Iterator[Event]:
        for raw in self.decoder.feed(chunk):
            self.failures = 0
            if raw.id is not None:
                self.last_event_id = raw.id
            yield Event.parse(raw.event, raw.id, raw.data)
        if self.decoder.retry_ms is not None:
            self.retry_ms = self.decoder.retry_ms


class SyncRuns(Runs[KObject, Page, Iterator[KObject]]):
    _r: SyncRequester

    def __init__(self, requester: SyncRequester) -> None:
        super().__init__(requester)

    def wait(
        self,
        run_id: str,
        *,
        timeout: float | None = None,
        poll_interval: float = 1.0,
        end_user_token: str | None = None,
    ) -> KObject:
        """The run once it is terminal or `requires_action` (RunTimeout after `timeout` seconds, if given)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            run = self.get(run_id, end_user_token=end_user_token)
            if run.status in SETTLED:
                return run
            if deadline is not None and time.monotonic() >= deadline:
                raise RunTimeout(run, timeout or 0)
            self._r.sleep(poll_interval)

    def create_and_wait(self, *, timeout: float | None = None, poll_interval: float = 1.0, **fields: Any) -> KObject:
        """Start a run and return it once it is terminal or `requires_action`: the API's `wait`, then polling."""
        wait = fields.pop("wait", NOT_GIVEN)
        if wait is NOT_GIVEN:
            wait = MAX_WAIT_S if timeout is None else max(0, min(MAX_WAIT_S, int(timeout)))
        run = self.create(**fields, wait=wait)
        if run.status in SETTLED:
            return run
        token = fields.get("end_user_token") or None
        return self.wait(run.id, timeout=timeout, poll_interval=poll_interval, end_user_token=token)

    def create_and_run(
        self,
        *,
        client_tools: Mapping[str, ClientTool],
        timeout: float | None = None,
        poll_interval: float = 1.0,
        **fields: Any,
    ) -> KObject:
        """Start a run and answer its client-tool calls with `client_tools` (name -> function called with the
        call's arguments as keyword arguments; its return value, JSON, is the output) until the run ends; returns
        the final run. A function that raises, or a tool name with no function, is answered with `is_error`. A run
        that waits for a person's approval (`required_action.type` `approve_tool_calls`) is returned as it is: decide
        with `approve_tool_calls`, then wait again.
        `timeout` bounds each wait for the run to settle (RunTimeout), not the whole loop."""
        token = fields.get("end_user_token") or None
        run = self.create_and_wait(timeout=timeout, poll_interval=poll_interval, **fields)
        while run.status == "requires_action" and not _awaits_approval(run):
            outputs = [self._answer(call, client_tools) for call in _calls(run)]
            run = self.submit_tool_outputs(run.id, tool_outputs=outputs, end_user_token=token)
            if run.status not in SETTLED:
                run = self.wait(run.id, timeout=timeout, poll_interval=poll_interval, end_user_token=token)
        return run

    @staticmethod
    def _answer(call: dict[str, Any], client_tools: Mapping[str, ClientTool]) -> dict[str, Any]:
        function = client_tools.get(call["name"])
        if function is None:
            return _unknown(call)
        try:
            result = function(**_arguments(call))
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()
                raise ClientToolFailed("an async function needs AsyncClient")
        except Exception as error:
            return _failure(call, error)
        return _output_for(call, result)

    def stream(
        self, run_id: str, *, last_event_id: str | int | None = None, end_user_token: str | None = None
    ) -> Iterator[Event]:
        """The run's events as they happen, until `run.completed`, `run.failed`, `run.cancelled` or
        `run.requires_action`; a stream that ends before one of them is resumed after the last event received."""
        follow = _Follow(None if last_event_id is None else str(last_event_id))
        yield from self._follow(run_id, follow, end_user_token)

    def stream_text(
        self, run_id: str, *, last_event_id: str | int | None = None, end_user_token: str | None = None
    ) -> Iterator[str]:
        """The run's answer as it is written: its text each time it changes (`kagent_client.Answer`), ending with the
        run's `output.text` — or "" when its claims could not be checked: show a neutral reply then."""
        answer = Answer()
        for event in self.stream(run_id, last_event_id=last_event_id, end_user_token=end_user_token):
            if answer.add(event) or (answer.done and not answer.text):
                yield answer.text

    def create_and_stream(self, **fields: Any) -> Iterator[Event]:
        """Start a run (`"stream": true`) and yield its events as `stream()` does."""
        follow = _Follow(None)
        request = _stream_create_request(fields)
        run_id = None
        try:
            with closing(_read_sync(self._r.send(request, stream=True), follow)) as events:
                for event in events:
                    if run_id is None and isinstance(event.data, KObject):
                        run_id = event.data.get("id")
                    yield event
                    if event.event in CLOSING_EVENTS:
                        return
        except httpx.TransportError as error:
            if run_id is None:  # the run may exist: never started twice
                raise connection_error(request, error) from error
            follow.failures += 1
        if run_id is None:
            raise ApiError(0, "stream_ended", "The run's event stream ended before it named the run.")
        self._r.sleep(follow.retry_ms / 1000)
        yield from self._follow(run_id, follow, fields.get("end_user_token") or None)

    def _follow(self, run_id: str, follow: _Follow, end_user_token: str | None) -> Iterator[Event]:
        return _follow_sync(
            self._r,
            lambda last: _events_request(run_id, last, end_user_token),
            follow,
            ended=lambda: self.get(run_id, end_user_token=end_user_token).status in TERMINAL,
        )


def _read_sync(response: httpx.Response, follow: _Follow) -> Generator[Event, None, None]:
    follow.start()
    try:
        for chunk in response.iter_bytes():
            yield from follow.events(chunk)
    finally:
        response.close()


def _follow_sync(
    requester: SyncRequester,
    request_for: Callable[[str | None], Request],
    follow: _Follow,
    *,
    ended: Callable[[], bool],
) -> Iterator[Event]:
    """An event stream followed as a browser's EventSource does: resumed after the last event received when it
    ends or breaks, until a closing event (a run's), a 204, or, when a stream brought nothing, `ended()`."""
    while True:
        request = request_for(follow.last_event_id)
        received = False
        try:
            response = requester.send(request, stream=True)
            if response.status_code == 204:  # everything is behind us and nothing will come: stop, as EventSource
                response.close()
                return
            with closing(_read_sync(response, follow)) as events:
                for event in events:
                    received = True
                    yield event
                    if event.event in CLOSING_EVENTS:
                        return
        except httpx.TransportError as error:  # the connection broke mid-stream
            follow.failures += 1
            if follow.failures > requester.policy.max_retries:
                raise connection_error(request, error) from error
        if not received and ended():
            return  # resumed after a run's last event (a server that answers 200 rather than 204)
        requester.sleep(follow.retry_ms / 1000)


class AsyncRuns(Runs[Awaitable[KObject], Awaitable[Page], AsyncIterator[KObject]]):
    _r: AsyncRequester

    def __init__(self, requester: AsyncRequester) -> None:
        super().__init__(requester)

    async def wait(
        self,
        run_id: str,
        *,
        timeout: float | None = None,
        poll_interval: float = 1.0,
        end_user_token: str | None = None,
    ) -> KObject:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            run = await self.get(run_id, end_user_token=end_user_token)
            if run.status in SETTLED:
                return run
            if deadline is not None and time.monotonic() >= deadline:
                raise RunTimeout(run, timeout or 0)
            await self._r.sleep(poll_interval)

    async def create_and_wait(
        self, *, timeout: float | None = None, poll_interval: float = 1.0, **fields: Any
    ) -> KObject:
        wait = fields.pop("wait", NOT_GIVEN)
        if wait is NOT_GIVEN:
            wait = MAX_WAIT_S if timeout is None else max(0, min(MAX_WAIT_S, int(timeout)))
        run = await self.create(**fields, wait=wait)
        if run.status in SETTLED:
            return run
        token = fields.get("end_user_token") or None
        return await self.wait(run.id, timeout=timeout, poll_interval=poll_interval, end_user_token=token)

    async def create_and_run(
        self,
        *,
        client_tools: Mapping[str, ClientTool],
        timeout: float | None = None,
        poll_interval: float = 1.0,
        **fields: Any,
    ) -> KObject:
        """As Client.runs.create_and_run; the functions may be async (awaited) or plain."""
        token = fields.get("end_user_token") or None
        run = await self.create_and_wait(timeout=timeout, poll_interval=poll_interval, **fields)
        while run.status == "requires_action" and not _awaits_approval(run):
            outputs = [await self._answer(call, client_tools) for call in _calls(run)]
            run = await self.submit_tool_outputs(run.id, tool_outputs=outputs, end_user_token=token)
            if run.status not in SETTLED:
                run = await self.wait(run.id, timeout=timeout, poll_interval=poll_interval, end_user_token=token)
        return run

    @staticmethod
    async def _answer(call: dict[str, Any], client_tools: Mapping[str, ClientTool]) -> dict[str, Any]:
        function = client_tools.get(call["name"])
        if function is None:
            return _unknown(call)
        try:
            result = function(**_arguments(call))
            if inspect.isawaitable(result):
                result = await result
        except Exception as error:
            return _failure(call, error)
        return _output_for(call, result)

    async def stream(
        self, run_id: str, *, last_event_id: str | int | None = None, end_user_token: str | None = None
    ) -> AsyncIterator[Event]:
        follow = _Follow(None if last_event_id is None else str(last_event_id))
        async for event in self._follow(run_id, follow, end_user_token):
            yield event

    async def stream_text(
        self, run_id: str, *, last_event_id: str | int | None = None, end_user_token: str | None = None
    ) -> AsyncIterator[str]:
        answer = Answer()
        async for event in self.stream(run_id, last_event_id=last_event_id, end_user_token=end_user_token):
            if answer.add(event) or (answer.done and not answer.text):
                yield answer.text

    async def create_and_stream(self, **fields: Any) -> AsyncIterator[Event]:
        follow = _Follow(None)
        request = _stream_create_request(fields)
        run_id = None
        try:
            async with aclosing(_read_async(await self._r.send(request, stream=True), follow)) as events:
                async for event in events:
                    if run_id is None and isinstance(event.data, KObject):
                        run_id = event.data.get("id")
                    yield event
                    if event.event in CLOSING_EVENTS:
                        return
        except httpx.TransportError as error:
            if run_id is None:
                raise connection_error(request, error) from error
            follow.failures += 1
        if run_id is None:
            raise ApiError(0, "stream_ended", "The run's event stream ended before it named the run.")
        await self._r.sleep(follow.retry_ms / 1000)
        async for event in self._follow(run_id, follow, fields.get("end_user_token") or None):
            yield event

    def _follow(self, run_id: str, follow: _Follow, end_user_token: str | None) -> AsyncIterator[Event]:
        async def ended() -> bool:
            return (await self.get(run_id, end_user_token=end_user_token)).status in TERMINAL

        return _follow_async(self._r, lambda last: _events_request(run_id, last, end_user_token), follow, ended=ended)


async def _read_async(response: httpx.Response, follow: _Follow) -> AsyncGenerator[Event, None]:
    follow.start()
    try:
        async for chunk in response.aiter_bytes():
            for event in follow.events(chunk):
                yield event
    finally:
        await response.aclose()


async def _follow_async(
    requester: AsyncRequester,
    request_for: Callable[[str | None], Request],
    follow: _Follow,
    *,
    ended: Callable[[], Awaitable[bool]],
) -> AsyncIterator[Event]:
    while True:
        request = request_for(follow.last_event_id)
        received = False
        try:
            response = await requester.send(request, stream=True)
            if response.status_code == 204:
                await response.aclose()
                return
            async with aclosing(_read_async(response, follow)) as events:
                async for event in events:
                    received = True
                    yield event
                    if event.event in CLOSING_EVENTS:
                        return
        except httpx.TransportError as error:
            follow.failures += 1
            if follow.failures > requester.policy.max_retries:
                raise connection_error(request, error) from error
        if not received and await ended():
            return
        await requester.sleep(follow.retry_ms / 1000)


# --- a conversation's events ---------------------------------------------------------------------------------------

_SESSION_EVENTS = "/v1/sessions/{id}/events"


class SyncSessions(Sessions[KObject, Page, Iterator[KObject]]):
    _r: SyncRequester

    def stream(
        self, session_id: str, *, last_event_id: str | int | None = None, end_user_token: str | None = None
    ) -> Iterator[Event]:
        """The conversation's events as they happen (`session.message.created`, `session.updated`), for as long as
        you read them: the stream is resumed after the last event received whenever it ends or breaks."""
        follow = _Follow(None if last_event_id is None else str(last_event_id))
        yield from _follow_sync(
            self._r,
            lambda last: _stream_request(_SESSION_EVENTS, session_id, last, end_user_token),
            follow,
            ended=lambda: False,
        )


class AsyncSessions(Sessions[Awaitable[KObject], Awaitable[Page], AsyncIterator[KObject]]):
    _r: AsyncRequester

    async def stream(
        self, session_id: str, *, last_event_id: str | int | None = None, end_user_token: str | None = None
    ) -> AsyncIterator[Event]:
        follow = _Follow(None if last_event_id is None else str(last_event_id))

        async def never() -> bool:
            return False

        request_for = lambda last: _stream_request(_SESSION_EVENTS, session_id, last, end_user_token)  # noqa: E731
        async for event in _follow_async(self._r, request_for, follow, ended=never):
            yield event
