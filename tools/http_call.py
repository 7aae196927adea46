"""Execute one HTTP tool call: render -> sign -> send through the hardened client -> shape (SPEC §5-§6).

The run engine calls `http_tool_call` after the policy check allowed the call. It returns what the model is shown
(`model_result`), what the run steps record (`step`: everything the model was not shown, secrets masked), and
whether the request may have reached the business's system (so a retry decision can be made; a retry must reuse the
same `call_id`, which is sent as `webhook-id`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kagent.egress import USER_AGENT, EgressClient, EgressError, Recorder, get_client, shown_code
from kagent.masking import mask_secrets
from kagent.signing import SigningError, webhook_headers
from tools.shaping import ShapingError, clean_text, shape_failure, shape_response
from tools.template_values import EndUserIdentity, SecretLookup, TemplateError
from tools.templating import RenderedRequest, render_request

BODY_EXCERPT_CHARS = 1000
PURPOSE = "http_tool"

_UNREADABLE_EGRESS_CODES = frozenset({"response_too_large", "bad_response"})
_ARGUMENT_CODES = frozenset({"invalid_arguments", "blank_placeholder", "unresolved_placeholder"})


@dataclass(frozen=True)
class HttpCallOutcome:
    model_result: dict[str, Any]  # {"ok": true, "data": …} or {"ok": false, "error": {"code", "guidance"}}
    # method, host, path, status, body_excerpt, duration_ms, error_code: what the tenant reads in the run steps.
    # Never the address the host resolved to (a map of our network once refused): that is in the egress log only.
    step: dict[str, Any]
    may_have_reached_upstream: bool

    @property
    def ok(self) -> bool:
        return bool(self.model_result.get("ok"))


def _refusal(code: str, guidance: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "guidance": guidance}}


def template_failure(exc: TemplateError) -> dict[str, Any]:
    """A call that was never sent. Argument problems are the model's to fix; anything else is configuration."""
    if exc.code in _ARGUMENT_CODES and exc.parameter:
        return _refusal("invalid_arguments", f"Check the argument {exc.parameter}: {exc.message}.")
    if exc.code == "verified_user_required":
        return _refusal(
            "verified_user_required",
            "This needs a verified customer. Tell the customer you can't look this up in this conversation.",
        )
    return _refusal(
        "not_available",
        "This tool can't be used right now. Tell the customer you can't do this at the moment; do not guess a result.",
    )


def _masked(body: bytes, secret_values: Sequence[str]) -> tuple[str, bytes]:
    """The body with every secret masked, before anything is cut (a cut could split a secret and leave its start
    showing): as text for the step's excerpt, and as bytes for shaping (an upstream that echoes a secret, like an API
    repeating the key it was sent, must not hand it to the model). Bytes that are not UTF-8 go to shaping as they
    are: it refuses them as unreadable."""
    try:
        text, strict = body.decode("utf-8"), True
    except UnicodeDecodeError:
        text, strict = body.decode("utf-8", "replace"), False
    if not secret_values:
        return text, body
    masked = mask_secrets(text, tuple(secret_values))
    return masked, masked.encode("utf-8") if strict else body


def _excerpt(masked_text: str, secret_values: Sequence[str]) -> str:
    # Cleaning can only shorten, so 4x leaves room for removed characters; masked again after cleaning in case line
    # breaks turned into spaces made a secret with spaces in it.
    cleaned = clean_text(masked_text[: BODY_EXCERPT_CHARS * 4], keep_joiners=True)
    return mask_secrets(cleaned, tuple(secret_values))[:BODY_EXCERPT_CHARS]


def masked_result(value: Any, secret_values: Sequence[str]) -> Any:
    """What the model is shown, every string (keys too) masked once more after shaping cleaned and cut it. Shaped
    results are shallow (rows of fields; an MCP result's structure at most a few levels deep)."""
    if isinstance(value, str):
        return mask_secrets(value, tuple(secret_values))
    if isinstance(value, list):
        return [masked_result(item, secret_values) for item in value]
    if isinstance(value, dict):
        return {
            mask_secrets(key, tuple(secret_values)): masked_result(item, secret_values) for key, item in value.items()
        }
    return value


def http_tool_call(
    *,
    project_id: str | None,
    tool: Mapping[str, Any],
    arguments: Mapping[str, Any],
    call_id: str,
    end_user: EndUserIdentity | None,
    variables: Mapping[str, str],
    secret_lookup: SecretLookup,
    signing_secrets: Sequence[str],
    client: EgressClient | None = None,
    clock: Callable[[], float] = time.time,
    record: Recorder | None = None,
    before_send: Callable[[], None] | None = None,
) -> HttpCallOutcome:
    """One HTTP tool call. Never raises for anything the tenant, the model or the upstream can cause. `before_send`
    is called once the request is made and before it is sent (the run engine gives its database connection back
    there: nothing is read from the database after it)."""
    started = time.monotonic()
    step: dict[str, Any] = {
        "tool": tool.get("name", ""),
        "call_id": call_id,
        "method": "",
        "host": "",
        "path": "",
        "status": None,
        "body_excerpt": "",
        "duration_ms": 0,
        "error_code": "",
    }

    def done(model_result: dict[str, Any], reached: bool) -> HttpCallOutcome:
        step["duration_ms"] = step["duration_ms"] or int((time.monotonic() - started) * 1000)
        return HttpCallOutcome(model_result=model_result, step=step, may_have_reached_upstream=reached)

    try:
        rendered: RenderedRequest = render_request(
            tool=tool, arguments=arguments, end_user=end_user, variables=variables, secret_lookup=secret_lookup
        )
    except TemplateError as exc:
        step["error_code"] = exc.code
        step["error_message"] = exc.message
        return done(template_failure(exc), False)
    secrets = rendered.secret_values
    step.update(method=rendered.method, host=rendered.host, path=mask_secrets(rendered.path, secrets))

    body = rendered.body
    try:
        signature = webhook_headers(
            secrets=signing_secrets, message_id=call_id, timestamp=int(clock()), body=body or b""
        )
    except SigningError as exc:  # never send an unsigned call
        step["error_code"] = exc.code
        return done(template_failure(TemplateError(exc.code, exc.message)), False)
    headers = {**rendered.headers, **signature, "User-Agent": USER_AGENT}
    if before_send is not None:
        before_send()

    try:
        response = (client or get_client()).request(
            project_id=project_id,
            purpose=PURPOSE,
            method=rendered.method,
            url=rendered.url,
            headers=headers,
            body=body,
            timeout_ms=rendered.timeout_ms,
            secret_values=secrets,
            record=record,
        )
    except EgressError as exc:
        step.update(error_code=shown_code(exc.code), status=exc.status)
        code = "unreadable" if exc.code in _UNREADABLE_EGRESS_CODES else "upstream_failed"
        return done(shape_failure(code), exc.may_have_reached_upstream)

    masked_text, masked_body = _masked(response.body, secrets)
    step.update(
        status=response.status,
        duration_ms=response.duration_ms,
        body_excerpt=_excerpt(masked_text, secrets),
    )
    if response.status == 429:
        step["error_code"] = "upstream_rate_limited"
        return done(shape_failure("rate_limited"), True)
    if not 200 <= response.status < 300:
        step["error_code"] = "upstream_status"
        return done(shape_failure("upstream_failed"), True)
    config = tool.get("config") or {}
    try:
        shaped = shape_response(
            body=masked_body, response_config=config.get("response"), tool_name=str(tool.get("name", ""))
        )
    except ShapingError as exc:
        step["error_code"] = "unreadable"
        step["error_message"] = exc.message
        return done(shape_failure("unreadable"), True)
    step["rows_total"] = shaped.rows_total
    step["rows_shown"] = shaped.rows_shown
    return done(masked_result(shaped.model_result, secrets) if secrets else shaped.model_result, True)
