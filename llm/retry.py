"""The retry policy of every model call: which failures are worth another attempt, how many attempts, and how long
to wait between them (exponential backoff with jitter, at least a 429's Retry-After)."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

from llm.types import ModelError, ModelRequest, ModelResponse

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
BACKOFF_BASE_S = 0.5  # 0.5 s, then 1 s, then 2 s ... between attempts
# Each wait is stretched or shrunk by up to 25%, so workers that failed together don't retry in lockstep.
BACKOFF_JITTER = 0.25
RETRY_AFTER_CAP_S = 20.0  # a 429's Retry-After is honoured up to this, so one run can't be parked for minutes
# Injectable for tests: `retry.SLEEP = waits.append`.
SLEEP: Callable[[float], None] = time.sleep
_jitter = random.Random()

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
# Egress codes that may clear up by themselves; every other refusal (policy, TLS, redirect, size) will not.
RETRYABLE_EGRESS_CODES = frozenset({"connect_failed", "timeout", "bad_response", "dns_failed"})


class UpstreamError(ModelError):
    """A ModelError that may carry the server's Retry-After (seconds)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
        detail: str = "",
    ) -> None:
        super().__init__(message, retryable=retryable, status=status, detail=detail)
        self.retry_after = retry_after


def with_retries(call: Callable[[ModelRequest], ModelResponse], request: ModelRequest) -> ModelResponse:
    """`call(request)` (one attempt of a provider), tried again with backoff while it fails with a retryable
    ModelError; after the last attempt, or at once for anything else, ModelError(retryable=False)."""
    provider = request.model.get("provider")
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if attempt > 1 and request.sink is not None:
            request.sink.restart()  # what the failed attempt streamed is void
        try:
            return call(request)
        except ModelError as exc:
            if not exc.retryable or attempt == MAX_ATTEMPTS:
                suffix = f" (after {attempt} attempts)" if exc.retryable else ""
                # The full reason stays here, in the server log; the message is what the tenant reads.
                logger.warning(
                    "model call failed: provider=%s run=%s attempt=%d status=%s error=%s",
                    provider,
                    request.run_id,
                    attempt,
                    exc.status,
                    exc.detail,
                )
                raise ModelError(
                    f"{exc}{suffix}", retryable=False, status=exc.status, detail=f"{exc.detail}{suffix}"
                ) from exc
            wait = backoff_delay(attempt, retry_after=getattr(exc, "retry_after", None))
            logger.warning(
                "model call failed, retrying in %.2fs: provider=%s run=%s attempt=%d status=%s error=%s",
                wait,
                provider,
                request.run_id,
                attempt,
                exc.status,
                exc.detail,
            )
            SLEEP(wait)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def backoff_delay(attempt: int, *, retry_after: float | None = None) -> float:
    """The wait after failed attempt number `attempt` (1-based): 0.5 s, 1 s, 2 s... each ±25%, at least Retry-After."""
    base = BACKOFF_BASE_S * 2 ** (attempt - 1)
    wait: float = base * (1 + BACKOFF_JITTER * (2 * _jitter.random() - 1))
    if retry_after is not None and retry_after > 0:
        wait = max(wait, min(float(retry_after), RETRY_AFTER_CAP_S))
    return wait
