"""Model providers: one `complete(request)` for every model an agent can use (SPEC §5 "Model providers").

- `openai_compatible`: Chat Completions with tools. With no tenant `base_url` it calls the operator's endpoint
  (`KAGENT_LLM_BASE_URL`, trusted configuration: plain httpx, http allowed, e.g. a local vLLM). With a tenant
  `base_url` it goes ONLY through the hardened client (`kagent.egress`), with the key from the tenant secret named
  `api_key_secret`, sent only to a host in that secret's `allowed_hosts`.
- `anthropic`: the Messages API, always through the hardened client (tenant `base_url` or https://api.anthropic.com).
- `demo`: a small deterministic offline model (picks a tool by word overlap, fills arguments from the schema, says
  it is a demo, never claims what a tool result didn't confirm).

Transient failures (timeouts, connection errors, 408, 429, 5xx, unreadable answers) are retried with exponential
backoff and jitter; after the last attempt, or at once for anything else, `ModelError(retryable=False)` is raised
and the engine fails the run with `model_error`. Error messages never hold an API key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings

from kagent.egress import USER_AGENT
from kagent.masking import mask_secrets
from runs.llm import Message, ModelError, ModelRequest, ModelResponse, ToolCallRequest, ToolDefinition, Usage
from tools.arabic import normalize_arabic, normalize_digits

logger = logging.getLogger(__name__)

# --- Retry policy -------------------------------------------------------------------------------------------------

MAX_ATTEMPTS = 3
BACKOFF_BASE_S = 0.5  # 0.5 s, then 1 s, then 2 s ... between attempts
# Each wait is stretched or shrunk by up to 25%, so workers that failed together don't retry in lockstep.
BACKOFF_JITTER = 0.25
RETRY_AFTER_CAP_S = 20.0  # a 429's Retry-After is honoured up to this, so one run can't be parked for minutes
# Injectable for tests: `providers.SLEEP = waits.append`.
SLEEP: Callable[[float], None] = time.sleep
_jitter = random.Random()

# --- Operator endpoint (trusted, plain httpx) ---------------------------------------------------------------------

OPERATOR_CONNECT_TIMEOUT_S = 5.0
OPERATOR_TOTAL_TIMEOUT_S = 60.0  # override with settings.KAGENT_LLM_TIMEOUT_S
MAX_ANSWER_BYTES = 8 * 1024 * 1024  # a chat answer is kilobytes; this only stops a broken endpoint filling memory

# --- Tenant endpoints (hardened client) ---------------------------------------------------------------------------

TENANT_TIMEOUT_MS = 15_000  # the seed's "Network limits": custom model base_urls get at most 15 seconds
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_DEFAULT_MAX_TOKENS = 1024
NOTICE_PREFIX = "[K-Agent notice] "  # notices go as user text: many servers reject a second system message

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
# Egress codes that may clear up by themselves; every other refusal (policy, TLS, redirect, size) will not.
_RETRYABLE_EGRESS_CODES = frozenset({"connect_failed", "timeout", "bad_response", "dns_failed"})


class _UpstreamError(ModelError):
    """A ModelError that may carry the server's Retry-After (seconds)."""

    def __init__(
        self, message: str, *, retryable: bool, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, retryable=retryable, status=status)
        self.retry_after = retry_after


@dataclass(frozen=True)
class _HttpAnswer:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


def complete(request: ModelRequest) -> ModelResponse:
    """One model answer for `request`, retried with backoff on transient failures.

    Raises ModelError(retryable=False) when the model can't answer: the engine fails the run with `model_error`.
    """
    provider = request.model.get("provider")
    if provider == "demo":
        return demo_complete(request)  # offline and deterministic: nothing to retry
    call = _PROVIDERS.get(str(provider))
    if call is None:
        raise ModelError(f"unknown model provider {provider!r}", retryable=False)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            return call(request)
        except ModelError as exc:
            if not exc.retryable or attempt == MAX_ATTEMPTS:
                suffix = f" (after {attempt} attempts)" if exc.retryable else ""
                raise ModelError(f"{exc}{suffix}", retryable=False, status=exc.status) from exc
            wait = backoff_delay(attempt, retry_after=getattr(exc, "retry_after", None))
            logger.warning(
                "model call failed, retrying in %.2fs: provider=%s run=%s attempt=%d status=%s error=%s",
                wait,
                provider,
                request.run_id,
                attempt,
                exc.status,
                exc,
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


# --- Shared HTTP helpers ------------------------------------------------------------------------------------------


def _mask(text: str, secrets: Sequence[str]) -> str:
    return mask_secrets(text, secrets, replacement="****")


def _retry_after(headers: dict[str, str]) -> float | None:
    raw = headers.get("retry-after", "").strip()
    try:
        return float(raw) if raw else None
    except ValueError:  # an HTTP date: rare from model servers, and the backoff covers it
        return None


def _error_excerpt(body: bytes) -> str:
    """The server's own error message, short (OpenAI and Anthropic both answer {"error": {"message": ...}})."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace")
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:200]
        if isinstance(error, str):
            return error[:200]
        if isinstance(data.get("message"), str):
            return str(data["message"])[:200]
    return body[:200].decode("utf-8", "replace")


def _check_status(answer: _HttpAnswer, *, what: str, secrets: Sequence[str]) -> dict[str, Any]:
    """The answer's JSON object, or a ModelError saying whether trying again could help."""
    if answer.status != 200:
        excerpt = _mask(_error_excerpt(answer.body), secrets)
        raise _UpstreamError(
            f"{what} answered HTTP {answer.status}: {excerpt}".strip(),
            retryable=answer.status in RETRYABLE_STATUSES,
            status=answer.status,
            retry_after=_retry_after(answer.headers) if answer.status == 429 else None,
        )
    try:
        data = json.loads(answer.body)
    except ValueError:
        # A truncated or garbled answer is a glitch of the server or a proxy in between: worth another attempt.
        raise ModelError(f"{what} answered with invalid JSON", retryable=True, status=200) from None
    if not isinstance(data, dict):
        raise ModelError(f"{what} answered with JSON that is not an object", retryable=True, status=200)
    return data


_operator_client: httpx.Client | None = None
_operator_pid: int | None = None
_operator_lock = threading.Lock()


def _operator_http() -> httpx.Client:
    """One pooled client per process (a forked Celery worker gets its own: sockets are never shared across forks)."""
    global _operator_client, _operator_pid
    with _operator_lock:
        if _operator_client is None or _operator_pid != os.getpid():
            _operator_client = httpx.Client(
                # Trusted operator configuration, but no environment proxies: the endpoint is named explicitly.
                trust_env=False,
                follow_redirects=False,
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
                headers={"User-Agent": USER_AGENT},
            )
            _operator_pid = os.getpid()
        return _operator_client


def _operator_post(url: str, *, headers: dict[str, str], body: bytes, secrets: Sequence[str]) -> _HttpAnswer:
    """POST to the operator's endpoint with a total deadline (httpx has only per-operation timeouts)."""
    total = float(getattr(settings, "KAGENT_LLM_TIMEOUT_S", None) or OPERATOR_TOTAL_TIMEOUT_S)
    deadline = time.monotonic() + total
    timeout = httpx.Timeout(total, connect=min(OPERATOR_CONNECT_TIMEOUT_S, total))
    try:
        with _operator_http().stream("POST", url, headers=headers, content=body, timeout=timeout) as response:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise ModelError("the model endpoint's answer is too large", retryable=False)
                chunks.append(chunk)
                # A server trickling bytes never trips a read timeout: check the whole exchange's deadline.
                if time.monotonic() > deadline:
                    raise ModelError(f"the model endpoint did not answer within {total:g}s", retryable=True)
            return _HttpAnswer(
                status=response.status_code,
                headers={k.lower(): v for k, v in response.headers.items()},
                body=b"".join(chunks),
            )
    except httpx.TimeoutException:
        raise ModelError(f"the model endpoint did not answer within {total:g}s", retryable=True) from None
    except httpx.UnsupportedProtocol:
        raise ModelError("KAGENT_LLM_BASE_URL must be an http:// or https:// URL", retryable=False) from None
    except httpx.TransportError as exc:
        # The exception text names the URL at most, never headers; mask anyway in case a key was put in the URL.
        message = _mask(f"could not reach the model endpoint: {type(exc).__name__}", secrets)
        raise ModelError(message, retryable=True) from None
    except httpx.InvalidURL:
        raise ModelError("KAGENT_LLM_BASE_URL is not a valid URL", retryable=False) from None


def _tenant_secret(request: ModelRequest, url: str) -> str:
    """The tenant's API key for `url`, refusing (non-retryable) when it is missing or not allowed for that host."""
    from kagent.egress import EgressError, url_check
    from kagent.secrets import secret_resolve

    name = request.model.get("api_key_secret")
    if not isinstance(name, str) or not name:
        raise ModelError("model.api_key_secret is required for this model", retryable=False)
    try:
        host = url_check(url).host
    except EgressError as exc:
        raise ModelError(f"model base_url is not allowed: {exc.message}", retryable=False) from None
    secret = secret_resolve(project_id=request.project_id, name=name)
    if secret is None:
        raise ModelError(f"the secret {name} named by model.api_key_secret does not exist", retryable=False)
    allowed = {h.strip().lower().rstrip(".") for h in secret.allowed_hosts}
    if host not in allowed:
        raise ModelError(
            f"the secret {name} may not be sent to {host}; add that host to its allowed_hosts", retryable=False
        )
    return secret.value


def _signature(request: ModelRequest, body: bytes) -> dict[str, str]:
    from kagent.ids import new_id
    from kagent.models import Project, SigningSecret
    from kagent.secrets import signing_secrets_valid
    from kagent.signing import webhook_headers

    project = Project.objects.filter(pk=request.project_id).first()
    if project is None:
        raise ModelError("no project to sign the model call for", retryable=False)
    secrets = signing_secrets_valid(project=project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    return webhook_headers(secrets=secrets, message_id=new_id("msg"), timestamp=int(time.time()), body=body)


def _tenant_post(
    request: ModelRequest, url: str, *, headers: dict[str, str], body: bytes, secrets: Sequence[str]
) -> _HttpAnswer:
    """The adapter to the hardened client: the only way a tenant model URL is reached. Like every call to a tenant
    URL it is signed with the project's tool signing secret (SPEC §6, "Signing")."""
    from kagent.egress import EgressError, get_client

    headers = {**headers, **_signature(request, body)}
    try:
        response = get_client().request(
            project_id=request.project_id or None,
            purpose="model",
            method="POST",
            url=url,
            headers=headers,
            body=body,
            timeout_ms=TENANT_TIMEOUT_MS,
            secret_values=list(secrets),
        )
    except EgressError as exc:
        raise ModelError(
            _mask(f"model endpoint call failed ({exc.code}): {exc.message}", secrets),
            retryable=exc.code in _RETRYABLE_EGRESS_CODES,
            status=exc.status,
        ) from None
    return _HttpAnswer(status=response.status, headers=dict(response.headers), body=response.body)


def _parse_arguments(raw: Any) -> str:
    """Tool-call arguments as JSON text: servers send a string, an object (Ollama), null or nothing."""
    if raw is None:
        return "{}"
    if isinstance(raw, str):
        return raw if raw.strip() else "{}"
    return json.dumps(raw, ensure_ascii=False)


def _object(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else {}: servers leave parts out or send null."""
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _fallback_call_id(request: ModelRequest, index: int, name: str, arguments: str) -> str:
    """A stable id for a call the server sent without one: same conversation and call -> same id."""
    turn = sum(1 for m in request.messages if m.role == "assistant")
    digest = hashlib.sha256(f"{request.run_id}|{turn}|{index}|{name}|{arguments}".encode()).hexdigest()[:16]
    return f"call_{digest}"


# --- openai_compatible --------------------------------------------------------------------------------------------


def openai_request_body(request: ModelRequest, *, model_name: str) -> dict[str, Any]:
    """The Chat Completions request body for `request` (public so tests and the benchmark can build the same)."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "user":
            messages.append({"role": "user", "content": message.content})
        elif message.role == "notice":
            messages.append({"role": "user", "content": NOTICE_PREFIX + message.content})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                    for call in message.tool_calls
                ]
            elif not message.content:
                entry["content"] = ""  # an assistant turn needs content or tool_calls
            messages.append(entry)
        elif message.role == "tool":
            messages.append({"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content})
    body: dict[str, Any] = {"model": model_name, "messages": messages, "stream": False}
    if request.tools:
        # With tool_choice "none" the tools stay in the request: the transcript refers to them, and some servers
        # reject tool calls in the history when no tools are declared.
        body["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in request.tools
        ]
        body["tool_choice"] = request.tool_choice
    if isinstance(request.model.get("temperature"), int | float):
        body["temperature"] = request.model["temperature"]
    if isinstance(request.model.get("max_output_tokens"), int):
        body["max_tokens"] = request.model["max_output_tokens"]
    return body


def openai_parse_response(request: ModelRequest, data: dict[str, Any], *, model_name: str) -> ModelResponse:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelError("the model answered without choices", retryable=True, status=200)
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ModelError("the model answered without a message", retryable=True, status=200)
    content = message.get("content")
    if isinstance(content, list):  # some servers answer with content parts
        text = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    else:
        text = content if isinstance(content, str) else ""
    calls: list[ToolCallRequest] = []
    raw_calls = message.get("tool_calls")
    for index, raw in enumerate(raw_calls if isinstance(raw_calls, list) else []):
        if not isinstance(raw, dict):
            continue
        function = _object(raw.get("function"))
        name = function.get("name")
        if not isinstance(name, str) or not name:
            continue  # a call without a name can't be answered; the model is told nothing ran by its absence
        arguments = _parse_arguments(function.get("arguments"))
        call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else None
        calls.append(
            ToolCallRequest(
                id=call_id or _fallback_call_id(request, index, name, arguments), name=name, arguments=arguments
            )
        )
    usage = _object(data.get("usage"))
    return ModelResponse(
        text=text,
        tool_calls=tuple(calls),
        usage=Usage(input_tokens=_int(usage.get("prompt_tokens")), output_tokens=_int(usage.get("completion_tokens"))),
        model_name=str(data.get("model") or model_name),
    )


def openai_compatible_complete(request: ModelRequest) -> ModelResponse:
    """One attempt (no retries) against an OpenAI-compatible Chat Completions endpoint."""
    base_url = request.model.get("base_url")
    configured_name = request.model.get("name")
    if base_url:
        if not isinstance(configured_name, str) or not configured_name:
            raise ModelError("model.name is required with a model base_url", retryable=False)
        url = f"{str(base_url).rstrip('/')}/chat/completions"
        key = _tenant_secret(request, url)
        body = openai_request_body(request, model_name=configured_name)
        answer = _tenant_post(
            request,
            url,
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            body=json.dumps(body, ensure_ascii=False).encode(),
            secrets=[key],
        )
        return openai_parse_response(
            request, _check_status(answer, what="the model endpoint", secrets=[key]), model_name=configured_name
        )

    operator_url = str(getattr(settings, "KAGENT_LLM_BASE_URL", "") or "")
    if not operator_url:
        raise ModelError("no model endpoint is configured (KAGENT_LLM_BASE_URL is empty)", retryable=False)
    model_name = configured_name or str(getattr(settings, "KAGENT_LLM_MODEL", "") or "")
    if not model_name:
        raise ModelError("no model name: set model.name or KAGENT_LLM_MODEL", retryable=False)
    operator_key = str(getattr(settings, "KAGENT_LLM_API_KEY", "") or "")
    headers = {"Content-Type": "application/json"}
    if operator_key:
        headers["Authorization"] = f"Bearer {operator_key}"
    body = openai_request_body(request, model_name=model_name)
    answer = _operator_post(
        f"{operator_url.rstrip('/')}/chat/completions",
        headers=headers,
        body=json.dumps(body, ensure_ascii=False).encode(),
        secrets=[operator_key],
    )
    data = _check_status(answer, what="the model endpoint", secrets=[operator_key])
    return openai_parse_response(request, data, model_name=model_name)


# --- anthropic ----------------------------------------------------------------------------------------------------


def _tool_input(arguments: str) -> dict[str, Any]:
    """A past call's arguments as the object Anthropic requires (invalid JSON from the model replays as {})."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _is_failure(content: str) -> bool:
    try:
        value = json.loads(content)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("ok") is False


def anthropic_request_body(request: ModelRequest, *, model_name: str) -> dict[str, Any]:
    """The Messages API request body for `request`."""
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        # The API wants user and assistant strictly alternating: consecutive same-role entries become one message.
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})

    for message in request.messages:
        if message.role in ("user", "notice"):
            text = message.content if message.role == "user" else NOTICE_PREFIX + message.content
            add("user", [{"type": "text", "text": text or "(empty message)"}])  # empty text blocks are rejected
        elif message.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            for call in message.tool_calls:
                blocks.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call.arguments)}
                )
            add("assistant", blocks or [{"type": "text", "text": "(no answer)"}])
        elif message.role == "tool":
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content,
            }
            if _is_failure(message.content):
                result["is_error"] = True  # the API's own failure marker, next to our {"ok": false}
            add("user", [result])
    for turn in turns:
        if turn["role"] == "user":
            # tool_result blocks must come before any text in a user message (a notice may follow the results).
            turn["content"].sort(key=lambda block: 0 if block["type"] == "tool_result" else 1)
    body: dict[str, Any] = {
        "model": model_name,
        "max_tokens": request.model.get("max_output_tokens") or ANTHROPIC_DEFAULT_MAX_TOKENS,
        "messages": turns,
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
        ]
        body["tool_choice"] = {"type": request.tool_choice}
    temperature = request.model.get("temperature")
    if isinstance(temperature, int | float):
        body["temperature"] = min(float(temperature), 1.0)  # Anthropic's range is 0-1; the config allows up to 2
    return body


def anthropic_parse_response(data: dict[str, Any], *, model_name: str) -> ModelResponse:
    content = data.get("content")
    if not isinstance(content, list):
        raise ModelError("the model answered without content", retryable=True, status=200)
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use" and isinstance(block.get("name"), str) and block.get("id"):
            calls.append(
                ToolCallRequest(id=str(block["id"]), name=block["name"], arguments=_parse_arguments(block.get("input")))
            )
    usage = _object(data.get("usage"))
    return ModelResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage(input_tokens=_int(usage.get("input_tokens")), output_tokens=_int(usage.get("output_tokens"))),
        model_name=str(data.get("model") or model_name),
    )


def anthropic_complete(request: ModelRequest) -> ModelResponse:
    """One attempt (no retries) against the Anthropic Messages API, through the hardened client."""
    model_name = request.model.get("name")
    if not isinstance(model_name, str) or not model_name:
        raise ModelError("model.name is required for the anthropic provider", retryable=False)
    base = str(request.model.get("base_url") or ANTHROPIC_BASE_URL).rstrip("/")
    # Accept a base_url given with or without the /v1 suffix.
    url = f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"
    key = _tenant_secret(request, url)
    body = anthropic_request_body(request, model_name=model_name)
    answer = _tenant_post(
        request,
        url,
        headers={"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION, "Content-Type": "application/json"},
        body=json.dumps(body, ensure_ascii=False).encode(),
        secrets=[key],
    )
    return anthropic_parse_response(_check_status(answer, what="Anthropic", secrets=[key]), model_name=model_name)


# --- demo ---------------------------------------------------------------------------------------------------------

DEMO_PREFIX = "(Demo model)"
DEMO_MODEL_NAME = "demo"
DEMO_THRESHOLD = 2  # a word in a tool's name counts 2, in its description 1: one name word or two description words
_NAME_WEIGHT = 2
_WORD_RE = re.compile(r"\w+", re.UNICODE)
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")
_EMAIL_RE = re.compile(r"[^\s@<>()\"']+@[^\s@<>()\"']+\.[a-zA-Z]{2,}")
_ID_HINTS = ("number", "id", "code", "reference", "ref", "tracking", "رقم")

_STOPWORDS_RAW = """
a an the and or but if of to in on at by for from with about into over under as is are was were be been being am
i me my mine we us our you your yours he she it its they them their this that these those there here what which who
whom whose when where why how can could would should will shall may might must do does did done have has had having
not no yes please pls thanks thank hi hello hey ok okay so just also too very really some any all get got want wanted
need needs like know tell let help
في من الى إلى على عن ان أن إن انا أنا انت أنت هو هي نحن هم هل ما ماذا لماذا كيف متى اين أين هذا هذه ذلك تلك و او أو
يا لو مع لي لك عند كان كانت ممكن ابي أبي اريد أريد بدي شكرا مرحبا السلام عليكم لا نعم
"""
_STOPWORDS = frozenset(normalize_arabic(w) for w in _STOPWORDS_RAW.split())


def _stem(word: str) -> str:
    """A very light stem, applied to both sides alike: damaged ~ damage, orders ~ order, الطلب ~ طلب."""
    if word.startswith("ال") and len(word) > 4:
        return word[2:]
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def _words(text: str) -> list[str]:
    """Content words of `text`: Arabic-folded, split, stopwords and 1-letter tokens dropped, lightly stemmed."""
    out: list[str] = []
    for token in _WORD_RE.findall(normalize_arabic(text).replace("_", " ")):
        if len(token) < 2 or token in _STOPWORDS or token.isdigit():
            continue
        out.append(_stem(token))
    return out


def _tool_score(user_words: set[str], tool: ToolDefinition) -> int:
    name_words = set(_words(tool.name.replace("_", " ")))
    description_words = set(_words(tool.description))
    return sum(_NAME_WEIGHT if word in name_words else 1 if word in description_words else 0 for word in user_words)


def demo_pick_tool(user_text: str, tools: Sequence[ToolDefinition]) -> ToolDefinition | None:
    """The tool whose name and description share the most words with `user_text`, if it reaches the threshold."""
    user_words = set(_words(user_text))
    best: tuple[int, str] | None = None
    chosen: ToolDefinition | None = None
    for tool in tools:
        score = _tool_score(user_words, tool)
        # Ties go to the alphabetically first name, so the choice never depends on the order tools were given in.
        if score >= DEMO_THRESHOLD and (best is None or (-score, tool.name) < best):
            best, chosen = (-score, tool.name), tool
    return chosen


def _numbers(text: str) -> list[str]:
    return _NUMBER_RE.findall(normalize_arabic(text))


# A tenant's schema pattern is run against the end user's words, and Python's re has no timeout. So: short tokens
# only, and only simple patterns (no quantified group, as in (a+)+; no backreference; at most 3 quantifiers, so
# polynomial backtracking stays small). Anything else is not used: the id-like token fallback still applies.
_MAX_PATTERN_TOKENS = 50
_MAX_PATTERN_TOKEN_LENGTH = 40
_RISKY_PATTERN_RE = re.compile(r"\)\s*[*+?{]|\\[1-9]")
_QUANTIFIER_RE = re.compile(r"(?<!\\)[*+?{]")


def _safe_pattern(pattern: Any) -> re.Pattern[str] | None:
    if not isinstance(pattern, str) or len(pattern) > 200 or _RISKY_PATTERN_RE.search(pattern):
        return None
    if len(_QUANTIFIER_RE.findall(pattern)) > 3:
        return None
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _string_value(name: str, schema: dict[str, Any], text: str, *, required: bool) -> str | None:
    """A string argument from the user's words: a token matching the schema's pattern, an email for an email
    field, or (required fields only, where a guess beats nothing) an id-like token for a number/id/code field."""
    # Digits made ASCII (٨٨١٢ is 8812) but case kept, so a pattern like ^TKT-[0-9]+$ still matches.
    tokens = [t.strip(".#") for t in re.split(r"[\s,;:!?()\"']+", normalize_digits(text)) if t.strip(".#")]
    compiled = _safe_pattern(schema.get("pattern"))
    if compiled is not None:
        for token in tokens[:_MAX_PATTERN_TOKENS]:
            if len(token) <= _MAX_PATTERN_TOKEN_LENGTH and compiled.fullmatch(token):
                return token
    hint_words = _WORD_RE.findall(f"{name} {schema.get('description', '')}".lower().replace("_", " "))
    if schema.get("format") == "email" or "email" in hint_words:
        match = _EMAIL_RE.search(text)
        if match:
            return match.group(0)
    if required and any(h in hint_words for h in _ID_HINTS):
        for token in tokens:
            if any(ch.isdigit() for ch in token):
                return token
    return None


def _enum_value(schema: dict[str, Any], user_words: set[str]) -> tuple[Any, bool]:
    """(the enum value whose words appear in the message, True), else (the first value, False)."""
    values = schema.get("enum") or []
    for value in values:
        words = set(_words(str(value).replace("_", " ")))
        if words and words <= user_words:
            return value, True
    return (values[0] if values else None), False


def demo_arguments(tool: ToolDefinition, user_text: str) -> dict[str, Any]:
    """Arguments for `tool` from the user's words, by its JSON Schema; optional ones only when clearly given."""
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    required = set(tool.parameters.get("required") or []) if isinstance(tool.parameters, dict) else set()
    user_words = set(_words(user_text))
    numbers = _numbers(user_text)
    message = " ".join(user_text.split())
    args: dict[str, Any] = {}
    for name, schema in sorted((properties or {}).items()):
        if not isinstance(schema, dict):
            continue
        is_required = name in required
        kind = schema.get("type")
        if "enum" in schema:
            value, matched = _enum_value(schema, user_words)
            if matched or is_required:
                args[name] = value
        elif kind == "string":
            found = _string_value(name, schema, user_text, required=is_required)
            if found is not None:
                args[name] = found
            elif is_required:
                limit = schema.get("maxLength")
                args[name] = message[:limit] if isinstance(limit, int) else message
        elif kind in ("integer", "number"):
            if numbers:
                number = float(numbers[0])
                args[name] = int(number) if kind == "integer" else number
            elif is_required:
                args[name] = schema.get("minimum", 1)
        elif is_required:
            args[name] = {"boolean": False, "array": [], "object": {}}.get(str(kind), "")
    return args


def _flatten(value: Any, path: tuple[str, ...] = ()) -> Iterable[tuple[str, Any]]:
    """(label, scalar) pairs of a result, a few list items at most; `data`/`result` wrappers add no words."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if not path and key in ("ok", "simulated"):
                continue  # said separately
            yield from _flatten(inner, (*path, str(key)))
    elif isinstance(value, list):
        for index, inner in enumerate(value[:3]):
            yield from _flatten(inner, (*path, str(index + 1)) if len(value) > 1 else path)
    else:
        label = " ".join(p for p in path if p not in ("data", "result")).replace("_", " ")
        yield label, ("yes" if value else "no") if isinstance(value, bool) else value


def _describe_result(message: Message) -> str:
    """One sentence about one tool result, saying only what the result says."""
    tool = message.name or "the tool"
    try:
        result = json.loads(message.content)
    except ValueError:
        return f"The {tool} tool answered: {message.content[:200]}"
    if isinstance(result, dict) and result.get("ok") is False:
        error = _object(result.get("error"))
        code = error.get("code") or "error"
        guidance = error.get("guidance") or error.get("message") or ""
        return f"The {tool} tool did not work ({code}), so I can't confirm it was done. {guidance}".strip()
    facts = [
        f"{key}: {value}" if key else str(value) for key, value in _flatten(result) if value is not None and value != ""
    ][:8]
    simulated = isinstance(result, dict) and result.get("simulated") is True
    head = f"The {tool} tool answered" + (" (simulated: nothing was sent)" if simulated else "")
    return f"{head}: {'; '.join(facts)}." if facts else f"{head} with no details."


def _demo_text(request: ModelRequest, last_user: int) -> str:
    results = [m for m in request.messages[last_user + 1 :] if m.role == "tool"]
    if results:
        return " ".join([DEMO_PREFIX, *(_describe_result(m) for m in results)])
    user_text = request.messages[last_user].content if last_user >= 0 else ""
    if not request.tools:
        return f'{DEMO_PREFIX} I am a demo model with no tools here, so I can only echo you: "{user_text[:200]}".'
    names = ", ".join(t.name for t in request.tools)
    return (
        f"{DEMO_PREFIX} I am a demo model: I match your words against this agent's tools, and none fits what you "
        f"wrote. Tools I can use: {names}."
    )


def _word_count(text: str) -> int:
    return len(text.split())


def demo_complete(request: ModelRequest) -> ModelResponse:
    """The offline demo model: deterministic, at most one tool call per user turn, and honest about being a demo."""
    last_user = max((i for i, m in enumerate(request.messages) if m.role == "user"), default=-1)
    input_tokens = _word_count(request.system) + sum(_word_count(m.content) for m in request.messages)
    # At most one tool per user turn: once this turn has called a tool, the next answer is the summary.
    already_called = any(m.role == "assistant" and m.tool_calls for m in request.messages[last_user + 1 :])
    if last_user >= 0 and request.tools and request.tool_choice == "auto" and not already_called:
        user_text = request.messages[last_user].content
        tool = demo_pick_tool(user_text, request.tools)
        if tool is not None:
            arguments = json.dumps(demo_arguments(tool, user_text), sort_keys=True, ensure_ascii=False)
            turn = sum(1 for m in request.messages if m.role == "assistant")
            digest = hashlib.sha256(f"{turn}|{tool.name}|{arguments}".encode()).hexdigest()[:12]
            return ModelResponse(
                text="",
                tool_calls=(ToolCallRequest(id=f"call_demo_{turn}_{digest}", name=tool.name, arguments=arguments),),
                usage=Usage(input_tokens=input_tokens, output_tokens=_word_count(arguments)),
                model_name=DEMO_MODEL_NAME,
            )
    text = _demo_text(request, last_user)
    return ModelResponse(
        text=text, usage=Usage(input_tokens=input_tokens, output_tokens=_word_count(text)), model_name=DEMO_MODEL_NAME
    )


_PROVIDERS: dict[str, Callable[[ModelRequest], ModelResponse]] = {
    "openai_compatible": openai_compatible_complete,
    "anthropic": anthropic_complete,
}
