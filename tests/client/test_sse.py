"""The client's Server-Sent Events parser (the WHATWG rules), and how `runs.stream` resumes a stream cut short:
a loopback server plays the cut."""

from __future__ import annotations

import json

import pytest
from kagent_client import ApiError, Client, SSEDecoder

from tests.client.loopback import Answer, Seen


def parse(*chunks: bytes) -> list[tuple[str, str, str | None]]:
    decoder = SSEDecoder()
    return [(e.event, e.data, e.id) for chunk in chunks for e in decoder.feed(chunk)]


def test_events_fields_and_comments():
    stream = b': keep-alive\n\nretry: 2000\n\nid: 1\nevent: run.queued\ndata: {"a": 1}\n\n: keep-alive\n\n'
    decoder = SSEDecoder()
    assert [(e.event, e.data, e.id) for e in decoder.feed(stream)] == [("run.queued", '{"a": 1}', "1")]
    assert decoder.retry_ms == 2000


def test_line_endings_of_every_kind_even_split_between_chunks():
    whole = b"id: 7\r\nevent: a\r\ndata: x\r\n\r\nevent: b\rdata: y\r\rdata: z\n\n"
    expected = [("a", "x", "7"), ("b", "y", "7"), ("message", "z", "7")]
    assert parse(whole) == expected
    assert parse(*[whole[i : i + 1] for i in range(len(whole))]) == expected  # byte by byte: CR | LF split too


def test_multiline_data_utf8_split_inside_a_character_and_bom():
    whole = "\ufeffdata: مرحبا\ndata:  two spaces\ndata\n\n".encode()
    expected = [("message", "مرحبا\n two spaces\n", None)]
    assert parse(whole) == expected
    assert parse(*[whole[i : i + 1] for i in range(len(whole))]) == expected


def test_what_is_ignored_and_what_is_dropped():
    stream = (
        b"event: nothing\n\n"  # no data: dispatches nothing
        b"retry: soon\nfoo: bar\nid: a\x00b\ndata: kept\n\n"  # bad retry, unknown field, an id with NUL: ignored
        b"id\ndata: no id\n\n"  # an empty id resets it
        b"data: cut short"  # the stream ends without the blank line: dropped
    )
    decoder = SSEDecoder()
    assert [(e.event, e.data, e.id) for e in decoder.feed(stream)] == [
        ("message", "kept", None),
        ("message", "no id", None),
    ]
    assert decoder.retry_ms is None


def sse(event_id: int, name: str, data: dict[str, object]) -> bytes:
    return f"id: {event_id}\nevent: {name}\ndata: {json.dumps(data)}\n\n".encode()


def test_a_stream_cut_before_the_run_settled_resumes_after_the_last_event(loopback):
    run = {"id": "run_01", "object": "run"}

    def script(seen: Seen) -> Answer:
        headers = {"Content-Type": "text/event-stream"}
        if seen.path.endswith("/events") and "last-event-id" not in seen.headers:
            # Keep-alives and a short reconnection delay, two events, then the server ends the stream.
            first = [b"retry: 10\n\n", b": keep-alive\n\n", sse(1, "run.queued", run), sse(2, "run.in_progress", run)]
            return Answer(200, first, headers)
        if seen.path.endswith("/events"):
            rest = [sse(3, "run.step.created", {"id": "step_1"}), sse(4, "run.completed", {**run, "status": "done"})]
            return Answer(200, [*rest, sse(5, "never.read", {})], headers)
        return Answer(200, json.dumps({**run, "status": "in_progress"}).encode())

    loopback.answer(script)
    with Client(api_key="ka_sk_test", base_url=loopback.url) as client:
        events = list(client.runs.stream("run_01"))
    assert [(e.id, e.event) for e in events] == [
        ("1", "run.queued"),
        ("2", "run.in_progress"),
        ("3", "run.step.created"),
        ("4", "run.completed"),
    ]
    assert events[-1].data.status == "done" and events[2].data.id == "step_1"
    streams = [seen for seen in loopback.seen if seen.path.endswith("/events")]
    assert [seen.headers.get("last-event-id") for seen in streams] == [None, "2"]


def test_a_stream_of_a_run_that_already_ended_stops(loopback):
    def script(seen: Seen) -> Answer:
        if seen.path.endswith("/events"):
            return Answer(200, [b"retry: 10\n\n"], {"Content-Type": "text/event-stream"})
        return Answer(200, json.dumps({"id": "run_01", "status": "completed"}).encode())

    loopback.answer(script)
    with Client(api_key="ka_sk_test", base_url=loopback.url) as client:
        assert list(client.runs.stream("run_01", last_event_id=9)) == []
    assert loopback.seen[0].headers["last-event-id"] == "9"


def test_a_stream_refused_is_an_api_error(loopback):
    error = {"error": {"code": "not_found", "message": "No such object in this project.", "details": None}}
    loopback.answer(lambda seen: Answer(404, json.dumps(error).encode()))
    with Client(api_key="ka_sk_test", base_url=loopback.url) as client, pytest.raises(ApiError) as raised:
        next(iter(client.runs.stream("run_01")))
    assert (raised.value.status, raised.value.code) == (404, "not_found")


def test_a_run_started_streaming_is_followed_after_its_stream_ends_and_started_once(loopback):
    run = {"id": "run_01", "object": "run", "status": "queued"}

    def script(seen: Seen) -> Answer:
        headers = {"Content-Type": "text/event-stream"}
        if seen.method == "POST":
            return Answer(201, [b"retry: 10\n\n", sse(1, "run.queued", run)], headers)
        return Answer(200, [sse(2, "run.in_progress", run), sse(3, "run.completed", run)], headers)

    loopback.answer(script)
    with Client(api_key="ka_sk_test", base_url=loopback.url) as client:
        events = list(client.runs.create_and_stream(agent="agt_1", input="hi"))
    assert [e.event for e in events] == ["run.queued", "run.in_progress", "run.completed"]
    assert [(s.method, s.path, s.headers.get("last-event-id")) for s in loopback.seen] == [
        ("POST", "/v1/runs", None),
        ("GET", "/v1/runs/run_01/events", "1"),
    ]
    assert json.loads(loopback.seen[0].body) == {"agent": "agt_1", "input": "hi", "stream": True}


def test_a_204_ends_the_stream_without_reconnecting(loopback):
    loopback.answer(lambda seen: Answer(204, b"", {}))
    with Client(api_key="ka_sk_test", base_url=loopback.url) as client:
        assert list(client.runs.stream("run_01", last_event_id=9)) == []
    assert [(s.method, s.path) for s in loopback.seen] == [("GET", "/v1/runs/run_01/events")]
