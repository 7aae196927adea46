"""`openai_compatible`: Chat Completions with tools (OpenAI, vLLM, Ollama, llama.cpp, any gateway).

With no tenant `base_url` it calls the operator's endpoint (`KAGENT_LLM_BASE_URL`, trusted configuration, over
kagent/http1.py; http allowed, e.g. a local vLLM). With a tenant `base_url` it goes ONLY through the hardened
client, with the key from the tenant secret named `api_key_secret`, sent only to a host in that secret's
`allowed_hosts`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from django.conf import settings

from llm.sse import SseReader
from llm.transport import (
    NOTICE_PREFIX,
    OPERATOR,
    HttpAnswer,
    check_status,
    json_count,
    json_object,
    operator_post,
    parse_arguments,
    tenant_post,
    tenant_secret,
)
from llm.types import ModelError, ModelRequest, ModelResponse, ToolCallRequest, Usage

logger = logging.getLogger(__name__)


def _fallback_call_id(request: ModelRequest, index: int, name: str, arguments: str) -> str:
    """A stable id for a call the server sent without one: same conversation and call -> same id."""
    turn = sum(1 for m in request.messages if m.role == "assistant")
    digest = hashlib.sha256(f"{request.run_id}|{turn}|{index}|{name}|{arguments}".encode()).hexdigest()[:16]
    return f"call_{digest}"


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
    # Streamed, with the usage in the last chunk: the answer's text reaches the customer as it is written.
    body: dict[str, Any] = {
        "model": model_name,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
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
        function = json_object(raw.get("function"))
        name = function.get("name")
        if not isinstance(name, str) or not name:
            continue  # a call without a name can't be answered; the model is told nothing ran by its absence
        arguments = parse_arguments(function.get("arguments"))
        call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else None
        calls.append(
            ToolCallRequest(
                id=call_id or _fallback_call_id(request, index, name, arguments), name=name, arguments=arguments
            )
        )
    usage = json_object(data.get("usage"))
    return ModelResponse(
        text=text,
        tool_calls=tuple(calls),
        usage=Usage(
            input_tokens=json_count(usage.get("prompt_tokens")),
            output_tokens=json_count(usage.get("completion_tokens")),
        ),
        model_name=str(data.get("model") or model_name),
    )


class OpenAIStream:
    """A Chat Completions answer streamed (`stream: true`), read as it arrives: its text given to the request's sink
    chunk by chunk, its tool calls assembled by index (never shown as text), the usage from the last chunk."""

    def __init__(self, request: ModelRequest) -> None:
        self.request = request
        self.reader = SseReader()
        self.chunks = 0
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] = {}
        self.model = ""
        self.finished = False  # a finish_reason or [DONE] came
        self.error = ""

    def feed(self, piece: bytes) -> None:
        for _, data in self.reader.feed(piece):
            if data.strip() == "[DONE]":
                self.finished = True
                continue
            try:
                chunk = json.loads(data)
            except ValueError:
                continue
            if isinstance(chunk, dict):
                self._chunk(chunk)

    def _chunk(self, chunk: dict[str, Any]) -> None:
        self.chunks += 1
        error = chunk.get("error")
        if error:
            self.error = str(json_object(error).get("message") or error)[:200]
            return
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        if choices[0].get("finish_reason"):
            self.finished = True
        delta = json_object(choices[0].get("delta"))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text.append(content)
            if self.request.sink is not None:
                self.request.sink.text(content)
        raw_calls = delta.get("tool_calls")
        for raw in raw_calls if isinstance(raw_calls, list) else []:
            if not isinstance(raw, dict):
                continue
            index = raw.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                index = len(self.calls)
            entry = self.calls.setdefault(index, {"id": "", "name": "", "arguments": []})
            if isinstance(raw.get("id"), str) and raw["id"]:
                entry["id"] = raw["id"]
            function = json_object(raw.get("function"))
            name = function.get("name")
            # The name comes whole in the first delta (OpenAI); a server that streams it in pieces is joined, one
            # that repeats it whole in every delta is not doubled.
            if isinstance(name, str) and name and name != entry["name"]:
                entry["name"] += name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                entry["arguments"].append(arguments)
            elif isinstance(arguments, dict):
                entry["arguments"].append(json.dumps(arguments, ensure_ascii=False))

    def response(self, *, model_name: str, what: str, operator: bool = False) -> ModelResponse:
        if self.error:
            # The operator's endpoint's words are operator detail: the server log has them, the tenant the fact.
            shown = f"{what} failed while answering" + ("" if operator else f": {self.error}")
            raise ModelError(shown, retryable=True, status=200, detail=f"{what} failed while answering: {self.error}")
        if not self.finished:
            # The body ended where its framing said (kagent/http1 refuses a cut chunked or sized body): a server that
            # leaves out finish_reason and [DONE] has said what it had to say.
            logger.warning("%s streamed an answer without finish_reason or [DONE]", what)
        calls: list[ToolCallRequest] = []
        for index in sorted(self.calls):
            entry = self.calls[index]
            if not entry["name"]:
                continue  # as in a whole answer: a call without a name can't be answered
            arguments = parse_arguments("".join(entry["arguments"]))
            call_id = entry["id"] or _fallback_call_id(self.request, index, entry["name"], arguments)
            calls.append(ToolCallRequest(id=call_id, name=entry["name"], arguments=arguments))
        return ModelResponse(
            text="".join(self.text),
            tool_calls=tuple(calls),
            usage=Usage(
                input_tokens=json_count(self.usage.get("prompt_tokens")),
                output_tokens=json_count(self.usage.get("completion_tokens")),
            ),
            model_name=self.model or model_name,
        )


def _answer(
    request: ModelRequest,
    stream: OpenAIStream,
    answer: HttpAnswer,
    *,
    model_name: str,
    what: str,
    secrets: list[str],
    operator: bool = False,
) -> ModelResponse:
    """The streamed answer, or, from a server that answered whole (it ignored `stream: true`, or an error), the whole
    answer read as before; its text then reaches the sink at once."""
    if answer.status == 200 and stream.chunks:
        return stream.response(model_name=model_name, what=what, operator=operator)
    data = check_status(answer, what=what, secrets=secrets, operator=operator)
    response = openai_parse_response(request, data, model_name=model_name)
    if response.text and request.sink is not None:
        request.sink.text(response.text)
    return response


def openai_compatible_complete(request: ModelRequest) -> ModelResponse:
    """One attempt (no retries) against an OpenAI-compatible Chat Completions endpoint."""
    base_url = request.model.get("base_url")
    configured_name = request.model.get("name")
    if base_url:
        if not isinstance(configured_name, str) or not configured_name:
            raise ModelError("model.name is required with a model base_url", retryable=False)
        url = f"{str(base_url).rstrip('/')}/chat/completions"
        key = tenant_secret(request, url)
        body = openai_request_body(request, model_name=configured_name)
        stream = OpenAIStream(request)
        answer = tenant_post(
            request,
            url,
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            body=json.dumps(body, ensure_ascii=False).encode(),
            secrets=[key],
            on_body=stream.feed,
        )
        return _answer(request, stream, answer, model_name=configured_name, what="the model endpoint", secrets=[key])

    operator_url = str(getattr(settings, "KAGENT_LLM_BASE_URL", "") or "")
    if not operator_url:
        raise ModelError(
            f"{OPERATOR} is not set up here: give the agent its own model.base_url and model.api_key_secret",
            retryable=False,
            detail="no model endpoint is configured (KAGENT_LLM_BASE_URL is empty)",
        )
    model_name = configured_name or str(getattr(settings, "KAGENT_LLM_MODEL", "") or "")
    if not model_name:
        raise ModelError(
            "no model name: set model.name", retryable=False, detail="no model name: set model.name or KAGENT_LLM_MODEL"
        )
    operator_key = str(getattr(settings, "KAGENT_LLM_API_KEY", "") or "")
    headers = {"Content-Type": "application/json"}
    if operator_key:
        headers["Authorization"] = f"Bearer {operator_key}"
    body = openai_request_body(request, model_name=model_name)
    stream = OpenAIStream(request)
    answer = operator_post(
        f"{operator_url.rstrip('/')}/chat/completions",
        headers=headers,
        body=json.dumps(body, ensure_ascii=False).encode(),
        secrets=[operator_key],
        on_body=stream.feed,
    )
    return _answer(request, stream, answer, model_name=model_name, what=OPERATOR, secrets=[operator_key], operator=True)
