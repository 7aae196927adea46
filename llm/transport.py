"""What the HTTP providers share: the exchange with the model endpoint, status checks and error excerpts (secrets
masked), and reading the JSON they answer.

The operator's endpoint (`KAGENT_LLM_BASE_URL`) is trusted configuration and is called over a plain HTTP/1.1 client
(`operator_post`). A tenant `base_url` is reached ONLY through the hardened client (`tenant_post`), with the key from
the tenant secret named `api_key_secret` (`tenant_secret`: only to a host in that secret's `allowed_hosts`), and
signed with the project's tool signing secret.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import httpx
from django.conf import settings

from kagent import http1
from kagent.egress import USER_AGENT, joined_headers
from kagent.masking import mask_secrets
from llm.retry import RETRYABLE_EGRESS_CODES, RETRYABLE_STATUSES, UpstreamError
from llm.types import ModelError, ModelRequest


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


# --- Status checks and error excerpts -----------------------------------------------------------------------------


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


def check_status(answer: HttpAnswer, *, what: str, secrets: Sequence[str], operator: bool = False) -> dict[str, Any]:
    """The answer's JSON object, or a ModelError saying whether trying again could help.

    `operator`: the answer is from the operator's endpoint, whose error body is operator detail (its own keys,
    models, internal names): the tenant is told the status only, the server log gets the rest."""
    if answer.status != 200:
        excerpt = _mask(_error_excerpt(answer.body), secrets)
        detail = f"{what} answered HTTP {answer.status}: {excerpt}".strip()
        raise UpstreamError(
            f"{what} answered HTTP {answer.status}" if operator else detail,
            retryable=answer.status in RETRYABLE_STATUSES,
            status=answer.status,
            retry_after=_retry_after(answer.headers) if answer.status == 429 else None,
            detail=detail,
        )
    try:
        data = json.loads(answer.body)
    except ValueError:
        # A truncated or garbled answer is a glitch of the server or a proxy in between: worth another attempt.
        raise ModelError(f"{what} answered with invalid JSON", retryable=True, status=200) from None
    if not isinstance(data, dict):
        raise ModelError(f"{what} answered with JSON that is not an object", retryable=True, status=200)
    return data


# --- Operator endpoint (trusted configuration: kagent/http1.py, not the hardened client) ------------------------------

# How tenants read the operator's endpoint in their errors: never its URL, its settings or what it said.
OPERATOR = "the default model service"

OPERATOR_CONNECT_TIMEOUT_S = 5.0
OPERATOR_TOTAL_TIMEOUT_S = 60.0  # override with settings.KAGENT_LLM_TIMEOUT_S
MAX_ANSWER_BYTES = 8 * 1024 * 1024  # a chat answer is kilobytes; this only stops a broken endpoint filling memory

_operator_endpoints: dict[str, http1.Endpoint] = {}
_operator_lock = threading.Lock()


@dataclass(frozen=True)
class _OperatorUrl:
    endpoint_key: str
    scheme: str
    host: str
    port: int
    host_header: str
    target: str


@lru_cache(maxsize=16)
def _operator_url(url: str) -> _OperatorUrl:
    """The endpoint's URL read as httpx reads it (international host names included), once per URL."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise _operator_misconfigured("KAGENT_LLM_BASE_URL is not a valid URL") from None
    if parsed.scheme not in ("http", "https"):
        raise _operator_misconfigured("KAGENT_LLM_BASE_URL must be an http:// or https:// URL")
    if not parsed.host:
        raise _operator_misconfigured("KAGENT_LLM_BASE_URL is not a valid URL")
    host = parsed.raw_host.decode("ascii")
    default_port = 443 if parsed.scheme == "https" else 80
    port = parsed.port or default_port
    bracketed = f"[{host}]" if ":" in host else host
    host_header = bracketed if port == default_port else f"{bracketed}:{port}"
    return _OperatorUrl(
        f"{parsed.scheme}://{host_header}", parsed.scheme, host, port, host_header, parsed.raw_path.decode("ascii")
    )


def _operator_endpoint(url: _OperatorUrl) -> http1.Endpoint:
    """One set of kept-alive connections per endpoint and process (a forked Celery worker makes its own: sockets
    are never shared across forks)."""
    with _operator_lock:
        endpoint = _operator_endpoints.get(url.endpoint_key)
        if endpoint is None or endpoint.pid != os.getpid():
            tls = _operator_tls() if url.scheme == "https" else None
            endpoint = http1.Endpoint(host=url.host, port=url.port, tls=tls, host_header=url.host_header)
            _operator_endpoints[url.endpoint_key] = endpoint
        return endpoint


def _operator_tls() -> ssl.SSLContext:
    """Verified against the trust store httpx uses (certifi's), not the environment's."""
    return httpx.create_ssl_context(trust_env=False)


def _operator_headers(headers: dict[str, str]) -> list[tuple[str, str]]:
    # No compression asked for: the answer is read as it comes, its size counted as it arrives.
    merged = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **headers}
    for name, value in merged.items():
        # A name is an RFC 9110 token; a value printable ASCII: no line break to end the header early.
        if not http1.is_token(name) or not (value.isascii() and value.isprintable()):
            raise _operator_misconfigured("the model endpoint's headers must be ASCII (KAGENT_LLM_API_KEY)")
    return list(merged.items())


def operator_post(
    url: str,
    *,
    headers: dict[str, str],
    body: bytes,
    secrets: Sequence[str],
    on_body: Callable[[bytes], None] | None = None,
) -> HttpAnswer:
    """POST to the operator's endpoint with a total deadline (connect, send and every read end by it). A redirect
    is not followed: it comes back as the answer's status. `on_body`: the answer's body as it arrives."""
    total = float(getattr(settings, "KAGENT_LLM_TIMEOUT_S", None) or OPERATOR_TOTAL_TIMEOUT_S)
    deadline = time.monotonic() + total
    target, sent = _operator_url(url), _operator_headers(headers)
    try:
        answer = _operator_endpoint(target).post(
            target.target,
            sent,
            body,
            connect_timeout=OPERATOR_CONNECT_TIMEOUT_S,
            deadline=deadline,
            max_body=MAX_ANSWER_BYTES,
            on_body=on_body,
        )
    except http1.TooLarge:
        raise ModelError(f"{OPERATOR}'s answer is too large", retryable=False) from None
    except TimeoutError:
        raise _operator_timeout(total) from None
    except (http1.ProtocolFault, OSError) as exc:
        # The exception text names the address at most, never headers; mask anyway in case a key was put in the URL.
        detail = _mask(f"could not reach the model endpoint: {type(exc).__name__}: {exc}", secrets)
        raise ModelError(f"{OPERATOR} could not be reached", retryable=True, detail=detail) from None
    return HttpAnswer(status=answer.status, headers=joined_headers(answer.headers), body=answer.body)


def _operator_timeout(total: float) -> ModelError:
    return ModelError(
        f"{OPERATOR} did not answer in time",
        retryable=True,
        detail=f"the model endpoint did not answer within {total:g}s",
    )


def _operator_misconfigured(detail: str) -> ModelError:
    return ModelError(f"{OPERATOR} is not configured correctly; tell the operator", retryable=False, detail=detail)


# --- Tenant endpoints (hardened client) ---------------------------------------------------------------------------

TENANT_TIMEOUT_MS = 15_000  # the seed's "Network limits": custom model base_urls get at most 15 seconds


def tenant_secret(request: ModelRequest, url: str) -> str:
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


def tenant_post(
    request: ModelRequest,
    url: str,
    *,
    headers: dict[str, str],
    body: bytes,
    secrets: Sequence[str],
    on_body: Callable[[bytes], None] | None = None,
) -> HttpAnswer:
    """The adapter to the hardened client: the only way a tenant model URL is reached. Like every call to a tenant
    URL it is signed with the project's tool signing secret (SPEC §6, "Signing")."""
    from kagent.egress import EgressError, get_client, tenant_message

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
            on_body=on_body,
        )
    except EgressError as exc:
        # The tenant reads a code it can act on; what the name resolved to and why it was refused (a map of our
        # network) stays in the server log and the egress log.
        raise ModelError(
            f"the model base_url could not be called ({tenant_message(exc)})",
            retryable=exc.code in RETRYABLE_EGRESS_CODES,
            status=exc.status,
            detail=_mask(
                f"model endpoint call failed ({exc.code}): {exc.message} [address {exc.resolved_address or '-'}]",
                secrets,
            ),
        ) from None
    return HttpAnswer(status=response.status, headers=dict(response.headers), body=response.body)


# --- What both HTTP providers send and read -----------------------------------------------------------------------

NOTICE_PREFIX = "[K-Agent notice] "  # notices go as user text: many servers reject a second system message


def parse_arguments(raw: Any) -> str:
    """Tool-call arguments as JSON text: servers send a string, an object (Ollama), null or nothing."""
    if raw is None:
        return "{}"
    if isinstance(raw, str):
        return raw if raw.strip() else "{}"
    return json.dumps(raw, ensure_ascii=False)


def json_object(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else {}: servers leave parts out or send null."""
    return value if isinstance(value, dict) else {}


def json_count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
