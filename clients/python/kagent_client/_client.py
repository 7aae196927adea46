"""`Client` and `AsyncClient`: one httpx client each, the API key, the retry policy, and every resource."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from types import TracebackType

import httpx

from kagent_client._http import AsyncRequester, RetryPolicy, SyncRequester
from kagent_client._objects import KObject, Page
from kagent_client._resources import (
    END_USER_TOKEN_HEADER,
    Agents,
    EgressEvents,
    EndUserSecret,
    Handoffs,
    KnowledgeSources,
    McpServers,
    Secrets,
    Tickets,
    ToolDrafts,
    Tools,
    ToolSigningSecret,
    WebhookEndpoints,
)
from kagent_client._runs import AsyncRuns, AsyncSessions, SyncRuns, SyncSessions

__version__ = "0.1.0"
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)  # reads outlast `wait` (30 s) and keep-alives (15 s)


def _settings(
    api_key: str | None,
    base_url: str | None,
    end_user_token: str | None,
    headers: Mapping[str, str] | None,
) -> tuple[str, dict[str, str]]:
    key = api_key or os.environ.get("KAGENT_API_KEY")
    if not key:
        raise ValueError("api_key is required (or set KAGENT_API_KEY): a ka_sk_… or ka_pk_… key.")
    url = (base_url or os.environ.get("KAGENT_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    url = url.removesuffix("/v1")  # the paths carry /v1 themselves
    sent = {
        "Authorization": f"Bearer {key}",
        "User-Agent": f"kagent-client/{__version__}",
        "Accept": "application/json",
        **dict(headers or {}),
    }
    if end_user_token:
        sent[END_USER_TOKEN_HEADER] = end_user_token
    return url, sent


class Client:
    """The K-Agent API for a server, a script or a test:

        client = Client(api_key="ka_sk_…", base_url="https://kagent.example.com")
        run = client.runs.create_and_wait(agent="agt_…", input="Where is my parcel?")

    `end_user_token`: sent with every request (`X-End-User-Token`), for a publishable key acting for a verified
    end user. `max_retries`: how many times a request is sent again (see `kagent_client._http` for when)."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        end_user_token: str | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        url, sent = _settings(api_key, base_url, end_user_token, headers)
        self.base_url = url
        self._http = httpx.Client(base_url=url, headers=sent, timeout=timeout, transport=transport)
        self._requester = SyncRequester(self._http, RetryPolicy(max_retries=max_retries))
        r = self._requester
        self.agents: Agents[KObject, Page, Iterator[KObject]] = Agents(r)
        self.tools: Tools[KObject, Page, Iterator[KObject]] = Tools(r)
        self.tool_drafts: ToolDrafts[KObject, Page, Iterator[KObject]] = ToolDrafts(r)
        self.mcp_servers: McpServers[KObject, Page, Iterator[KObject]] = McpServers(r)
        self.secrets: Secrets[KObject, Page, Iterator[KObject]] = Secrets(r)
        self.tool_signing_secret: ToolSigningSecret[KObject, Page, Iterator[KObject]] = ToolSigningSecret(r)
        self.end_user_secret: EndUserSecret[KObject, Page, Iterator[KObject]] = EndUserSecret(r)
        self.egress_events: EgressEvents[KObject, Page, Iterator[KObject]] = EgressEvents(r)
        self.sessions = SyncSessions(r)
        self.runs = SyncRuns(r)
        self.tickets: Tickets[KObject, Page, Iterator[KObject]] = Tickets(r)
        self.handoffs: Handoffs[KObject, Page, Iterator[KObject]] = Handoffs(r)
        self.knowledge_sources: KnowledgeSources[KObject, Page, Iterator[KObject]] = KnowledgeSources(r)
        self.webhook_endpoints: WebhookEndpoints[KObject, Page, Iterator[KObject]] = WebhookEndpoints(r)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


AO = Awaitable[KObject]
AL = Awaitable[Page]
AI = AsyncIterator[KObject]


class AsyncClient:
    """`Client` for asyncio: every method is awaited (`await client.runs.create_and_run(…)`), lists iterate with
    `async for`, client tools may be async functions."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        end_user_token: str | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        url, sent = _settings(api_key, base_url, end_user_token, headers)
        self.base_url = url
        self._http = httpx.AsyncClient(base_url=url, headers=sent, timeout=timeout, transport=transport)
        self._requester = AsyncRequester(self._http, RetryPolicy(max_retries=max_retries))
        r = self._requester
        self.agents: Agents[AO, AL, AI] = Agents(r)
        self.tools: Tools[AO, AL, AI] = Tools(r)
        self.tool_drafts: ToolDrafts[AO, AL, AI] = ToolDrafts(r)
        self.mcp_servers: McpServers[AO, AL, AI] = McpServers(r)
        self.secrets: Secrets[AO, AL, AI] = Secrets(r)
        self.tool_signing_secret: ToolSigningSecret[AO, AL, AI] = ToolSigningSecret(r)
        self.end_user_secret: EndUserSecret[AO, AL, AI] = EndUserSecret(r)
        self.egress_events: EgressEvents[AO, AL, AI] = EgressEvents(r)
        self.sessions = AsyncSessions(r)
        self.runs = AsyncRuns(r)
        self.tickets: Tickets[AO, AL, AI] = Tickets(r)
        self.handoffs: Handoffs[AO, AL, AI] = Handoffs(r)
        self.knowledge_sources: KnowledgeSources[AO, AL, AI] = KnowledgeSources(r)
        self.webhook_endpoints: WebhookEndpoints[AO, AL, AI] = WebhookEndpoints(r)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()


__all__ = ["AsyncClient", "Client", "DEFAULT_BASE_URL"]
