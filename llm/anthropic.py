"""`anthropic`: the Messages API, always through the hardened client (tenant `base_url` or
https://api.anthropic.com), with the key from the tenant secret named `api_key_secret`."""

from __future__ import annotations

import json
import logging
from typing import Any

from llm.sse import SseReader
from llm.transport import (
    NOTICE_PREFIX,
    check_status,
    json_count,
    json_object,
    parse_arguments,
    tenant_post,
    tenant_secret,
)
from llm.types import ModelError, ModelRequest, ModelResponse, ToolCallRequest, Usage

logger = logging.getLogger(__name__)
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
        "stream": True,  # the event stream: the answer's text reaches the customer as it is written
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


class AnthropicStream:
    """A Messages answer streamed (the event stream), read as it arrives: text deltas to the request's sink, tool
    inputs assembled from their JSON pieces (never shown as text), the usage from message_start and message_delta."""

    def __init__(self, request: ModelRequest) -> None:
        self.request = request
        self.reader = SseReader()
        self.events = 0
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, int] = {"input_tokens": 0, "output_tokens": 0}
        self.model = ""
        self.stopped = False  # message_stop came
        self.error = ""

    def feed(self, piece: bytes) -> None:
        for _, data in self.reader.feed(piece):
            try:
                event = json.loads(data)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("type"), str):
                self.events += 1
                self._event(event)

    def _event(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "message_start":
            message = json_object(event.get("message"))
            self.model = str(message.get("model") or "")
            self.usage["input_tokens"] = json_count(json_object(message.get("usage")).get("input_tokens"))
        elif kind == "content_block_start":
            opened = json_object(event.get("content_block"))
            at = event.get("index")
            if isinstance(at, int) and not isinstance(at, bool):
                self.blocks[at] = {**opened, "pieces": []}
        elif kind == "content_block_delta":
            index = event.get("index")
            found = self.blocks.get(index) if isinstance(index, int) else None
            delta = json_object(event.get("delta"))
            if found is None:
                return
            block = found
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str) and delta["text"]:
                block["pieces"].append(delta["text"])
                if self.request.sink is not None:
                    self.request.sink.text(delta["text"])
            elif delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                block["pieces"].append(delta["partial_json"])
        elif kind == "message_delta":
            self.usage["output_tokens"] = json_count(json_object(event.get("usage")).get("output_tokens"))
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            self.error = str(json_object(event.get("error")).get("message") or "error")[:200]

    def response(self, *, model_name: str) -> ModelResponse:
        if self.error:
            raise ModelError(f"Anthropic failed while answering: {self.error}", retryable=True, status=200)
        if not self.stopped:
            # The body ended where its framing said (kagent/http1 refuses a cut one): taken as the whole answer.
            logger.warning("Anthropic streamed an answer without message_stop")
        texts: list[str] = []
        calls: list[ToolCallRequest] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            joined = "".join(block["pieces"])
            if block.get("type") == "text":
                texts.append(joined)
            elif block.get("type") == "tool_use" and isinstance(block.get("name"), str) and block.get("id"):
                arguments = joined if joined.strip() else parse_arguments(block.get("input"))
                calls.append(ToolCallRequest(id=str(block["id"]), name=block["name"], arguments=arguments))
        return ModelResponse(
            text="".join(texts),
            tool_calls=tuple(calls),
            usage=Usage(input_tokens=self.usage["input_tokens"], output_tokens=self.usage["output_tokens"]),
            model_name=self.model or model_name,
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
    stream = AnthropicStream(request)
    answer = tenant_post(
        request,
        url,
        headers={"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION, "Content-Type": "application/json"},
        body=json.dumps(body, ensure_ascii=False).encode(),
        secrets=[key],
        on_body=stream.feed,
    )
    if answer.status == 200 and stream.events:
        return stream.response(model_name=model_name)
    # A server that answered whole (it ignored `stream`, or an error): read as before; its text reaches the sink now.
    response = anthropic_parse_response(check_status(answer, what="Anthropic", secrets=[key]), model_name=model_name)
    if response.text and request.sink is not None:
        request.sink.text(response.text)
    return response
