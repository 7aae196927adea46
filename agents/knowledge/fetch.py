"""One fetch of an API knowledge source: a signed GET through the hardened outbound client, shaped into text.

Seed "Network limits": every request to a URL a business configures (API knowledge sources included) goes through
the one protected client (`kagent.egress`, purpose "knowledge"), and, like every call to a tenant URL, carries
Standard Webhooks headers made with the project's tool signing secret and `User-Agent: K-Agent/1` (SPEC §6,
"Signing"). The outcome says what to record on the source; it never raises for anything the upstream can cause.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agents.knowledge.rows import rows_text
from kagent.egress import USER_AGENT, EgressClient, EgressError, get_client
from kagent.signing import SigningError, webhook_headers
from tools.shaping import ShapingError

PURPOSE: Final = "knowledge"
TIMEOUT_MS: Final = 10_000
_TRANSIENT: Final = frozenset({"connect_failed", "timeout", "tls_failed", "dns_failed", "upstream_rate_limited"})


@dataclass(frozen=True)
class FetchOutcome:
    ok: bool
    content: str  # the text of the rows (when ok)
    rows: int
    error_code: str  # "" when ok; an egress code, upstream_status, upstream_rate_limited, unreadable, …
    http_status: int | None

    @property
    def transient(self) -> bool:
        """A failure worth another try soon (the schedule tries again anyway): the network's or upstream's moment."""
        if self.ok:
            return False
        if self.error_code == "upstream_status":
            return (self.http_status or 0) >= 500
        return self.error_code in _TRANSIENT


def _failed(code: str, status: int | None = None) -> FetchOutcome:
    return FetchOutcome(ok=False, content="", rows=0, error_code=code, http_status=status)


def fetch_source(
    *,
    project_id: str,
    url: str,
    response_config: dict[str, Any],
    signing_secrets: Sequence[str],
    message_id: str,
    client: EgressClient | None = None,
    clock: Callable[[], float] = time.time,
) -> FetchOutcome:
    """GET `url`, signed with `signing_secrets` (newest first) under `message_id` (stable across retries)."""
    try:
        signature = webhook_headers(secrets=signing_secrets, message_id=message_id, timestamp=int(clock()), body=b"")
    except SigningError as exc:  # never send an unsigned call
        return _failed(exc.code)
    headers = {**signature, "User-Agent": USER_AGENT, "Accept": "application/json"}
    try:
        response = (client or get_client()).request(
            project_id=project_id,
            purpose=PURPOSE,
            method="GET",
            url=url,
            headers=headers,
            body=None,
            timeout_ms=TIMEOUT_MS,
        )
    except EgressError as exc:
        return _failed(exc.code, exc.status)
    if response.status == 429:
        return _failed("upstream_rate_limited", 429)
    if not 200 <= response.status < 300:
        return _failed("upstream_status", response.status)
    try:
        content, rows = rows_text(body=response.body, response_config=response_config)
    except ShapingError:
        return _failed("unreadable", response.status)
    return FetchOutcome(ok=True, content=content, rows=rows, error_code="", http_status=response.status)
