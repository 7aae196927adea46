"""Streamed model answers read as they arrive (llm/sse.py, OpenAIStream, AnthropicStream): the same answer
however the bytes are cut, text given to the sink in order and never a tool call's arguments, tool calls assembled,
an error inside the stream a retryable failure."""

from __future__ import annotations

import json

import pytest

from llm.anthropic import AnthropicStream
from llm.openai_compatible import OpenAIStream
from llm.sse import SseReader
from llm.types import ModelError, ModelRequest


class Sink:
    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.restarts = 0

    def text(self, delta: str) -> None:
        self.pieces.append(delta)

    def restart(self) -> None:
        self.restarts += 1


def request(sink: Sink) -> ModelRequest:
    return ModelRequest(
        system="", messages=(), tools=(), tool_choice="auto", model={}, project_id="proj_x", run_id="run_x", sink=sink
    )


def sse(*events: object, named: bool = False) -> bytes:
    out = b""
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event)
        name = f"event: {json.loads(data)['type']}\n" if named and data.startswith("{") else ""
        out += f"{name}data: {data}\n\n".encode()
    return out


OPENAI = sse(
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}], "model": "m"},
    {"choices": [{"index": 0, "delta": {"content": "Your order "}}]},
    {"choices": [{"index": 0, "delta": {"content": "has shipped."}}]},
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "order_status", "arguments": ""}}]
                },
            }
        ]
    },
    {
        "choices": [
            {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"order_number": '}}]}}
        ]
    },
    {
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"name": "order_status", "arguments": '"8812"}'}}]},
            }
        ]
    },
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7}},
    "[DONE]",
)


@pytest.mark.parametrize("cut", [1, 2, 3, 7, 64, len(OPENAI)])
def test_an_openai_stream_is_the_same_answer_however_it_is_cut(cut):
    sink = Sink()
    stream = OpenAIStream(request(sink))
    for start in range(0, len(OPENAI), cut):
        stream.feed(OPENAI[start : start + cut])
    response = stream.response(model_name="m", what="the model")
    assert response.text == "Your order has shipped." and "".join(sink.pieces) == response.text
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("call_1", "order_status", {"order_number": "8812"})  # a name repeated whole is not doubled
    ]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 7)
    assert all("8812" not in piece for piece in sink.pieces)  # arguments never reach the text


def test_an_error_inside_the_stream_is_a_retryable_failure_and_its_words_stay_with_the_operator():
    stream = OpenAIStream(request(Sink()))
    stream.feed(sse({"error": {"message": "overloaded on gpu-7.internal"}}))
    with pytest.raises(ModelError) as failed:
        stream.response(model_name="m", what="the default model service", operator=True)
    assert failed.value.retryable and "gpu-7" not in str(failed.value) and "gpu-7" in failed.value.detail


def test_a_stream_without_its_end_markers_is_taken_as_it_came():
    stream = OpenAIStream(request(Sink()))
    stream.feed(sse({"choices": [{"index": 0, "delta": {"content": "Hello."}}]}))
    assert stream.response(model_name="m", what="the model").text == "Hello."


ANTHROPIC = sse(
    {"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 9, "output_tokens": 0}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "check."}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "order_status", "input": {}},
    },
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"order_'}},
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": 'number": "8812"}'},
    },
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
    {"type": "message_stop"},
    named=True,
)


@pytest.mark.parametrize("cut", [1, 5, 33, len(ANTHROPIC)])
def test_an_anthropic_stream_is_the_same_answer_however_it_is_cut(cut):
    sink = Sink()
    stream = AnthropicStream(request(sink))
    for start in range(0, len(ANTHROPIC), cut):
        stream.feed(ANTHROPIC[start : start + cut])
    response = stream.response(model_name="claude-x")
    assert response.text == "Let me check." == "".join(sink.pieces)
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("toolu_1", "order_status", {"order_number": "8812"})
    ]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (9, 5)


def test_server_sent_events_lines_end_three_ways_and_comments_are_skipped():
    reader = SseReader()
    got = reader.feed(b": ping\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\ndata: 3\r")
    assert got == [("a", "1\n2")]
    assert reader.feed(b"\rdata: 4\n\n") == [("message", "3"), ("message", "4")]
