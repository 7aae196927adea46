"""Model providers: one `complete(request)` for every model an agent can use (SPEC §5 "Model providers").

- `openai_compatible`: Chat Completions with tools. With no tenant `base_url` it calls the operator's endpoint
  (`KAGENT_LLM_BASE_URL`, trusted configuration: a small HTTP/1.1 client of its own, `kagent/http1.py`;
  http allowed, e.g. a local vLLM). With a tenant `base_url` it goes ONLY through the hardened client
  (`kagent.egress`), with the key from the tenant secret named `api_key_secret`, sent only to a host in that
  secret's `allowed_hosts`.
- `anthropic`: the Messages API, always through the hardened client (tenant `base_url` or https://api.anthropic.com).
- `demo`: a small deterministic offline model (picks a tool by word overlap, fills arguments from the schema, says
  it is a demo, never claims what a tool result didn't confirm).

Transient failures (timeouts, connection errors, 408, 429, 5xx, unreadable answers) are retried with exponential
backoff and jitter; after the last attempt, or at once for anything else, `ModelError(retryable=False)` is raised
and the engine fails the run with `model_error`. Error messages never hold an API key.

Layout: `retry.py` (attempts, backoff, what is retryable), `transport.py` (the operator's and tenants' endpoints,
status checks, reading answers), one module per provider, and `REGISTRY` below, where a provider is added.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from llm.anthropic import anthropic_complete
from llm.demo import demo_complete
from llm.openai_compatible import openai_compatible_complete
from llm.retry import with_retries
from llm.types import ModelError, ModelRequest, ModelResponse

__all__ = ["ECHOING", "LABELS", "NAMES", "PROVIDERS", "REGISTRY", "Entry", "Provider", "complete"]

# One attempt at an answer (no retries: `complete` adds them), raising ModelError saying whether to try again.
Provider = Callable[[ModelRequest], ModelResponse]


@dataclasses.dataclass(frozen=True)
class Entry:
    """One provider: what `model.provider` names, what the dashboard calls it, its one attempt at an answer."""

    name: str
    label: str
    complete: Provider
    # Its text repeats other people's words (the demo echoes the customer and describes tool results): a tool call
    # written in that text is someone else's, not the model's. It is removed from the text, never run.
    echoes: bool = False


# The one list of providers. A new provider is a module in llm/ and one entry here: the agent config's
# `model.provider` enum and its message (agents/config.py) and the dashboard's choices derive from it.
REGISTRY: tuple[Entry, ...] = (
    Entry("openai_compatible", "OpenAI-compatible (Chat Completions)", openai_compatible_complete),
    Entry("anthropic", "Anthropic (Messages API)", anthropic_complete),
    # Offline and deterministic: it never raises ModelError, so the retry loop calls it once and never waits.
    Entry("demo", "Demo (offline, for trying things out)", demo_complete, echoes=True),
)

# `model.provider` of the agent config -> its provider.
PROVIDERS: dict[str, Provider] = {entry.name: entry.complete for entry in REGISTRY}
NAMES: tuple[str, ...] = tuple(entry.name for entry in REGISTRY)
LABELS: tuple[tuple[str, str], ...] = tuple((entry.name, entry.label) for entry in REGISTRY)
ECHOING: frozenset[str] = frozenset(entry.name for entry in REGISTRY if entry.echoes)


def complete(request: ModelRequest) -> ModelResponse:
    """One model answer for `request`, retried with backoff on transient failures.

    Raises ModelError(retryable=False) when the model can't answer: the engine fails the run with `model_error`.
    """
    provider = request.model.get("provider")
    call = PROVIDERS.get(str(provider))
    if call is None:
        raise ModelError(f"unknown model provider {provider!r}", retryable=False)
    return with_retries(call, request)
