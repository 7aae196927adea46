"""Execute one MCP tool call: the server's headers -> `tools/call` through the hardened client -> shape (SPEC §6,
"MCP servers"; issue 28).

The run engine calls `mcp_tool_call` after the policy check allowed the call (arguments validated strictly against
the input schema copied at publish). Like an HTTP tool call it returns what the model is shown, what the run steps
record (the server's own error text only there, cleaned and masked) and whether the call may have reached the
server (a retry after a crash reuses the call's id, which signs its `tools/call` as `webhook-id`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kagent.egress import EgressClient, Recorder
from kagent.errors import Unprocessable
from kagent.masking import mask_secrets, mask_secrets_in_json
from tools import mcp_client, mcp_jsonrpc
from tools.http_call import BODY_EXCERPT_CHARS, HttpCallOutcome, masked_result, template_failure
from tools.shaping import clean_text, shape_failure, shape_mcp_result
from tools.template_values import EndUserIdentity, SecretLookup, TemplateError
from tools.templating import render_request
from tools.validation import split_url

# What the model is told for each way a call can fail: the three neutral codes of an HTTP tool (seed, "What the
# model sees"). Everything else (a JSON-RPC error, `isError`, an HTTP status, a timeout) is `upstream_failed`.
_UNREADABLE = frozenset({"mcp_protocol_error", "mcp_unsupported_version", "response_too_large", "bad_response"})
_CONFIGURATION = frozenset(
    {"header_not_allowed", "no_signing_secret", "invalid_signing_secret", "invalid_message_id", "invalid_timestamp"}
)


def mcp_server(*, name: str, url: str, headers: Mapping[str, str], secret_lookup: SecretLookup) -> mcp_client.McpServer:
    """Where a server is and how to reach it, its headers' `{{secret.NAME}}` filled in (each secret only to the hosts
    it allows). Raises TemplateError (nothing is sent then)."""
    rendered = render_request(
        tool={"name": name, "config": {"method": "POST", "url": url, "headers": dict(headers)}},
        arguments={},
        end_user=None,
        variables={},
        secret_lookup=secret_lookup,
    )
    return mcp_client.McpServer(url=url, headers=rendered.headers, secret_values=rendered.secret_values)


def _excerpt(result: mcp_client.McpCallResult, secret_values: Sequence[str]) -> str:
    """What the server answered, for the run steps: its text parts, else its structured content."""
    if result.texts:
        raw = " ".join(text[: BODY_EXCERPT_CHARS * 4] for text in result.texts)
    elif result.structured_content is not None:
        try:
            raw = json.dumps(result.structured_content, ensure_ascii=False, default=str)[: BODY_EXCERPT_CHARS * 4]
        except RecursionError:
            raw = "[nested too deeply to show]"
    else:
        return ""
    masked = mask_secrets(raw[: BODY_EXCERPT_CHARS * 4], tuple(secret_values))
    return mask_secrets(clean_text(masked, keep_joiners=True), tuple(secret_values))[:BODY_EXCERPT_CHARS]


def _masked_parts(result: mcp_client.McpCallResult, secret_values: Sequence[str]) -> tuple[list[str], Any]:
    """The texts and the structured content with every secret masked (keys too) before anything is cut (a cut could
    split a secret and leave its start showing). Raises ValueError for structured content that can't be masked."""
    if not secret_values:
        return result.texts, result.structured_content
    secrets = tuple(secret_values)
    texts = [mask_secrets(text, secrets) for text in result.texts]
    if result.structured_content is None:
        return texts, None
    return texts, mask_secrets_in_json(result.structured_content, secrets)


def mcp_tool_call(
    *,
    project_id: str | None,
    tool: Mapping[str, Any],
    arguments: Mapping[str, Any],
    call_id: str,
    secret_lookup: SecretLookup,
    signing_secrets: Sequence[str],
    client: EgressClient | None = None,
    clock: Callable[[], float] = time.time,
    record: Recorder | None = None,
    before_send: Callable[[], None] | None = None,
    end_user: EndUserIdentity | None = None,
) -> HttpCallOutcome:
    """One MCP tool call of the definition `tool` (as published: `name`, `server`, `tool`, `url`, `headers`). Never
    raises for anything the tenant, the model or the server can cause. `before_send` is called once, before the
    first request of the call's session is sent (the run engine gives its database connection back there).
    `end_user`: the run's verified end user, sent to the server by the platform (never an argument of the model)."""
    started = time.monotonic()
    try:
        parts = split_url(str(tool.get("url", "")))
        host, path = parts.host, parts.path or "/"
    except Unprocessable:  # validated when the server was saved; a copy that isn't valid still never raises here
        host, path = "", ""
    step: dict[str, Any] = {
        "tool": tool.get("name", ""),
        "call_id": call_id,
        "server": tool.get("server", ""),
        "mcp_tool": tool.get("tool", ""),
        "method": "POST",
        "host": host,
        "path": path,
        "status": None,
        "body_excerpt": "",
        "duration_ms": 0,
        "error_code": "",
    }

    def done(model_result: dict[str, Any], reached: bool) -> HttpCallOutcome:
        step["duration_ms"] = int((time.monotonic() - started) * 1000)
        return HttpCallOutcome(model_result=model_result, step=step, may_have_reached_upstream=reached)

    try:
        server = mcp_server(
            name=str(tool.get("server", "")),
            url=str(tool.get("url", "")),
            headers=tool.get("headers") or {},
            secret_lookup=secret_lookup,
        )
    except TemplateError as exc:
        step.update(error_code=exc.code, error_message=exc.message)
        return done(template_failure(exc), False)
    secrets = server.secret_values
    step["path"] = mask_secrets(step["path"], secrets)
    try:
        result = mcp_client.call_tool(
            server=server,
            name=str(tool.get("tool", "")),
            arguments=arguments,
            project_id=project_id,
            signing_secrets=signing_secrets,
            call_id=call_id,
            client=client,
            clock=clock,
            record=record,
            before_send=before_send,
            end_user=None
            if end_user is None
            else {"external_id": end_user.external_id, "traits": dict(end_user.traits)},
        )
    except mcp_jsonrpc.McpError as exc:
        step.update(error_code=exc.code, error_message=exc.message, status=exc.status)
        if exc.rpc_code is not None:
            step["rpc_code"] = exc.rpc_code
        if exc.detail:
            step["body_excerpt"] = exc.detail  # the server's own words, cleaned, cut and masked by the client
        if exc.code in _CONFIGURATION:
            return done(template_failure(TemplateError(exc.code, exc.message)), exc.may_have_reached_upstream)
        if exc.code == "upstream_rate_limited":
            return done(shape_failure("rate_limited"), exc.may_have_reached_upstream)
        code = "unreadable" if exc.code in _UNREADABLE else "upstream_failed"
        return done(shape_failure(code), exc.may_have_reached_upstream)

    step["body_excerpt"] = _excerpt(result, secrets)
    if result.other_parts:
        step["parts_not_shown"] = result.other_parts
    if result.is_error:
        # The tool itself failed: its words go to the steps; the model gets the neutral code.
        step["error_code"] = "mcp_tool_error"
        return done(shape_failure("upstream_failed"), True)
    try:
        texts, structured = _masked_parts(result, secrets)
    except ValueError:  # nested too deeply to mask: never shown unmasked
        step["error_code"] = "unreadable"
        return done(shape_failure("unreadable"), True)
    shaped = shape_mcp_result(
        texts=texts, structured=structured, other_parts=result.other_parts, tool_name=str(tool.get("name", ""))
    )
    return done(masked_result(shaped, secrets) if secrets else shaped, True)
