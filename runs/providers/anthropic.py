"""`anthropic`: the Messages API, always through the hardened client (tenant `base_url` or
https://api.anthropic.com), with the key from the tenant secret named `api_key_secret`."""

from __future__ import annotations

import json
from typing import Any

from runs.llm import ModelError, ModelRequest, ModelResponse, ToolCallRequest, Usage
from runs.providers.transport import (
    NOTICE_PREFIX,
    check_status,
    json_count,
    json_object,
    parse_arguments,
    tenant_post,
    tenant_secret,
)

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_DEFAULT_MAX_TOKENS = 1024


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
                ToolCallRequest(id=str(block["id"]), name=block["name"], arguments=parse_arguments(block.get("input")))
            )
    usage = json_object(data.get("usage"))
    return ModelResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage(
            input_tokens=json_count(usage.get("input_tokens")), output_tokens=json_count(usage.get("output_tokens"))
        ),
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
    key = tenant_secret(request, url)
    body = anthropic_request_body(request, model_name=model_name)
    answer = tenant_post(
        request,
        url,
        headers={"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION, "Content-Type": "application/json"},
        body=json.dumps(body, ensure_ascii=False).encode(),
        secrets=[key],
    )
    return anthropic_parse_response(check_status(answer, what="Anthropic", secrets=[key]), model_name=model_name)
