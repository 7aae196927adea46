"""When the client sends a request again, and when it must not: a loopback server plays the faults (429 then 200,
5xx, an answer that never comes, a refused connection) that the real server won't produce on demand."""

from __future__ import annotations

import json
import logging
import socket

import pytest
from kagent_client import ApiConnectionError, ApiError, Client

from tests.client.loopback import Answer

RUN = {"id": "run_01", "object": "run", "status": "queued"}


def body(data: object) -> bytes:
    return json.dumps(data).encode()


def too_many(retry_after: str) -> Answer:
    error = {"error": {"code": "rate_limited", "message": "Slow down.", "details": None}}
    return Answer(429, body(error), {"Content-Type": "application/json", "Retry-After": retry_after})


def test_a_429_is_answered_again_after_its_retry_after(loopback, caplog):
    loopback.answer_in_turn(too_many("1"), Answer(200, body({"id": "agt_1", "object": "agent", "name": "Support"})))
    caplog.set_level(logging.INFO, logger="kagent_client")
    with Client(api_key="ka_sk_test", base_url=loopback.url) as client:
        agent = client.agents.get("agt_1")
    assert agent.name == "Support"
    assert [seen.path for seen in loopback.seen] == ["/v1/agents/agt_1", "/v1/agents/agt_1"]
    # The wait was the server's Retry-After, not the client's own backoff.
    assert "retrying GET /v1/agents/agt_1 in 1.0 s (HTTP 429)" in caplog.messages


def test_a_post_refused_with_429_is_sent_again_and_creates_one_run(loopback):
    loopback.answer_in_turn(too_many("0"), Answer(201, body(RUN)))
    with Client(api_key="ka_sk_test", base_url=loopback.url) as client:
        run = client.runs.create(agent="agt_1", input="hi")
    assert run.id == "run_01"
    posts = [seen for seen in loopback.seen if seen.method == "POST"]
    assert len(posts) == 2
    assert json.loads(posts[1].body) == {"agent": "agt_1", "input": "hi"}


def test_a_post_answered_503_is_not_sent_again(loopback):
    # The server answers 503 for an outage of its database or Redis, which can come after the run was committed
    # (while it waits on it, say): without an Idempotency-Key a second POST could start a second run.
    unavailable = Answer(
        503,
        body({"error": {"code": "service_unavailable", "message": "x"}}),
        {"Content-Type": "application/json", "Retry-After": "0"},
    )
    loopback.answer_in_turn(unavailable, Answer(201, body(RUN)))
    with Client(api_key="ka_sk_test", base_url=loopback.url) as client, pytest.raises(ApiError) as raised:
        client.runs.create(agent="agt_1", input="hi", idempotency_key=None)
    assert raised.value.status == 503 and raised.value.code == "service_unavailable"
    assert len(loopback.seen) == 1
    # A GET is sent again after a 503: reading twice changes nothing.
    loopback.answer_in_turn(unavailable, Answer(200, body(RUN)))
    with Client(api_key="ka_sk_test", base_url=loopback.url) as client:
        assert client.runs.get("run_01").status == "queued"


def test_a_post_that_may_have_been_carried_out_is_never_sent_twice(loopback):
    # A 500 (the server may have created the run before failing) and a 502 (a proxy lost the answer).
    for status in (500, 502):
        loopback.answer_in_turn(Answer(status, body({"error": {"code": "internal_error", "message": "x"}})))
        before = len(loopback.seen)
        with Client(api_key="ka_sk_test", base_url=loopback.url) as client, pytest.raises(ApiError) as raised:
            client.runs.create(agent="agt_1", input="hi", idempotency_key=None)
        assert raised.value.status == status
        assert len(loopback.seen) == before + 1


def test_a_post_whose_answer_never_came_is_not_sent_again(loopback):
    # The read timed out: the run may exist. A second POST could start a second run.
    loopback.answer_in_turn(Answer(201, body(RUN), delay_s=2))
    with Client(api_key="ka_sk_test", base_url=loopback.url, timeout=0.5) as client:
        with pytest.raises(ApiConnectionError) as raised:
            client.runs.create(agent="agt_1", input="hi", idempotency_key=None)
    assert raised.value.may_have_reached_server
    assert raised.value.status == 0 and raised.value.code == "connection_error"
    assert "look before sending it again" in raised.value.message
    assert len(loopback.seen) == 1


def test_a_get_is_sent_again_after_a_5xx_and_after_a_timeout(loopback):
    loopback.answer_in_turn(
        Answer(502, b"<html>bad gateway</html>", {"Content-Type": "text/html"}),
        Answer(200, body(RUN), delay_s=6),  # times out
        Answer(200, body(RUN)),
    )
    with Client(api_key="ka_sk_test", base_url=loopback.url, timeout=2) as client:
        assert client.runs.get("run_01").status == "queued"
    assert len(loopback.seen) == 3


def test_a_refused_connection_is_tried_again_even_for_a_post_then_reported(caplog):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    caplog.set_level(logging.INFO, logger="kagent_client")
    with Client(api_key="ka_sk_test", base_url=f"http://127.0.0.1:{port}", max_retries=2) as client:
        with pytest.raises(ApiConnectionError) as raised:
            client.runs.create(agent="agt_1", input="hi")
    assert not raised.value.may_have_reached_server
    assert len([m for m in caplog.messages if m.startswith("retrying POST /v1/runs")]) == 2


def test_a_retry_after_too_long_to_wait_is_the_answer(loopback):
    loopback.answer_in_turn(too_many("3600"))
    with Client(api_key="ka_sk_test", base_url=loopback.url) as client, pytest.raises(ApiError) as raised:
        client.agents.list()
    assert (raised.value.status, raised.value.code, raised.value.message) == (429, "rate_limited", "Slow down.")
    assert raised.value.headers["Retry-After"] == "3600"
    assert len(loopback.seen) == 1


def test_retries_give_up_after_max_retries(loopback):
    loopback.answer_in_turn(too_many("0"))
    with Client(api_key="ka_sk_test", base_url=loopback.url, max_retries=3) as client, pytest.raises(ApiError):
        client.agents.list()
    assert len(loopback.seen) == 4


def test_with_an_idempotency_key_a_lost_answer_and_a_5xx_are_sent_again_with_the_same_key(loopback):
    # A secret key's runs.create sends a key of its own: the server answers a request sent again with the run the
    # first one started (tests/runs/test_idempotency.py), so the client may send it again when it can't know.
    unavailable = Answer(503, body({"error": {"code": "service_unavailable", "message": "x"}}), {"Retry-After": "0"})
    loopback.answer_in_turn(Answer(201, body(RUN), delay_s=2), unavailable, Answer(201, body(RUN)))
    with Client(api_key="ka_sk_test", base_url=loopback.url, timeout=0.5, max_retries=3) as client:
        assert client.runs.create(agent="agt_1", input="hi").id == "run_01"
    posts = [seen for seen in loopback.seen if seen.method == "POST"]
    assert len(posts) == 3
    keys = {seen.headers.get("idempotency-key") for seen in posts}
    assert len(keys) == 1 and None not in keys
    with Client(api_key="ka_sk_test", base_url=loopback.url) as client:
        loopback.answer_in_turn(Answer(201, body(RUN)))
        client.runs.create(agent="agt_1", input="hi", idempotency_key="order-8812-1")
        loopback.answer_in_turn(Answer(201, body(RUN)))
        client.runs.create(agent="agt_1", input="again")
    assert loopback.seen[-2].headers["idempotency-key"] == "order-8812-1"
    assert loopback.seen[-1].headers["idempotency-key"] not in keys | {"order-8812-1"}  # a new one per run


def test_a_publishable_key_sends_no_idempotency_key_and_is_not_sent_again(loopback):
    loopback.answer_in_turn(Answer(502, body({"error": {"code": "internal_error", "message": "x"}})))
    with Client(api_key="ka_pk_test", base_url=loopback.url) as client, pytest.raises(ApiError):
        client.runs.create(agent="agt_1", input="hi")
    assert len(loopback.seen) == 1 and "idempotency-key" not in loopback.seen[0].headers
