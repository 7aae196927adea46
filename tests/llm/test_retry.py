"""The retry policy, seen through `complete` against the scripted fake: what is retried, how often, how long apart."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from fakes.llm import FakeLLM, Fault, text
from llm import providers
from llm.types import ModelError
from tests.conftest import wait_for
from tests.llm.conftest import make_request, user


def test_500_and_429_are_retried_with_backoff(fake_llm: FakeLLM, sleeps: list[float]) -> None:
    fake_llm.script("flaky", [text("Finally.", faults=[Fault(status=500), Fault(status=429)])])

    response = providers.complete(make_request({"provider": "openai_compatible", "name": "script:flaky"}, [user("x")]))

    assert response.text == "Finally."
    assert [(r.attempt, r.status) for r in fake_llm.requests("flaky")] == [(1, 500), (2, 429), (3, 200)]
    assert len(sleeps) == 2
    assert 0.5 * 0.75 <= sleeps[0] <= 0.5 * 1.25  # 0.5 s, then 1 s, each with ±25% jitter
    assert 1.0 * 0.75 <= sleeps[1] <= 1.0 * 1.25


def test_retry_after_of_a_429_is_honoured(fake_llm: FakeLLM, sleeps: list[float]) -> None:
    fake_llm.script("slow-down", [text("ok", faults=[Fault(status=429, retry_after=4)])])

    providers.complete(make_request({"provider": "openai_compatible", "name": "script:slow-down"}, [user("x")]))

    assert sleeps == [4.0]


def test_persistent_5xx_fails_after_three_attempts(fake_llm: FakeLLM, sleeps: list[float]) -> None:
    fake_llm.script("down", [text("never", faults=[Fault(status=503)] * 5)])

    with pytest.raises(ModelError) as caught:
        providers.complete(make_request({"provider": "openai_compatible", "name": "script:down"}, [user("x")]))

    assert caught.value.retryable is False  # the engine fails the run with model_error
    assert caught.value.status == 503
    assert "after 3 attempts" in str(caught.value)
    assert len(fake_llm.requests("down")) == 3
    assert len(sleeps) == 2


def test_400_is_not_retried(fake_llm: FakeLLM, sleeps: list[float]) -> None:
    fake_llm.script("bad", [text("never", faults=[Fault(status=400)])])

    with pytest.raises(ModelError) as caught:
        providers.complete(make_request({"provider": "openai_compatible", "name": "script:bad"}, [user("x")]))

    assert (caught.value.retryable, caught.value.status) == (False, 400)
    assert str(caught.value) == "the default model service answered HTTP 400"
    assert "injected fault 400" in caught.value.detail  # the operator's words: server log only
    assert len(fake_llm.requests("bad")) == 1
    assert sleeps == []


def test_a_timeout_is_retried_then_fails(fake_llm: FakeLLM, sleeps: list[float], settings: Any) -> None:
    settings.KAGENT_LLM_TIMEOUT_S = 0.5
    fake_llm.script("stuck", [text("too late", faults=[Fault(delay_s=1.5)] * 3)])
    started = time.monotonic()

    with pytest.raises(ModelError) as caught:
        providers.complete(make_request({"provider": "openai_compatible", "name": "script:stuck"}, [user("x")]))

    assert time.monotonic() - started < 3  # three 0.5 s timeouts, no real sleeps
    assert caught.value.retryable is False
    assert str(caught.value) == "the default model service did not answer in time (after 3 attempts)"
    assert "did not answer within 0.5s" in caught.value.detail
    assert len(sleeps) == 2
    wait_for(lambda: len(fake_llm.requests("stuck")) == 3, timeout=5, message="three attempts at the fake")


def test_a_timeout_then_an_answer_succeeds(fake_llm: FakeLLM, sleeps: list[float], settings: Any) -> None:
    settings.KAGENT_LLM_TIMEOUT_S = 0.5
    fake_llm.script("hiccup", [text("there you go", faults=[Fault(delay_s=1.0)])])

    response = providers.complete(make_request({"provider": "openai_compatible", "name": "script:hiccup"}, [user("x")]))

    assert response.text == "there you go"
    assert len(sleeps) == 1


def test_malformed_json_is_retried(fake_llm: FakeLLM, sleeps: list[float]) -> None:
    fake_llm.script("garbled", [text("clean", faults=[Fault(malformed=True)])])

    response = providers.complete(
        make_request({"provider": "openai_compatible", "name": "script:garbled"}, [user("x")])
    )

    assert response.text == "clean"
    assert len(sleeps) == 1


def test_unreachable_operator_endpoint_is_retried_then_fails(sleeps: list[float], settings: Any) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.KAGENT_LLM_BASE_URL = f"http://127.0.0.1:{port}/v1"
    settings.KAGENT_LLM_MODEL = "m"

    with pytest.raises(ModelError) as caught:
        providers.complete(make_request({"provider": "openai_compatible"}, [user("x")]))

    assert caught.value.retryable is False
    assert str(caught.value) == "the default model service could not be reached (after 3 attempts)"
    assert "could not reach the model endpoint: ConnectionRefusedError" in caught.value.detail
    assert len(sleeps) == 2


def test_unknown_provider_and_unknown_script_are_not_retried(fake_llm: FakeLLM, sleeps: list[float]) -> None:
    with pytest.raises(ModelError, match="unknown model provider"):
        providers.complete(make_request({"provider": "gpt5"}, [user("x")]))
    with pytest.raises(ModelError) as caught:
        providers.complete(make_request({"provider": "openai_compatible", "name": "script:missing"}, [user("x")]))
    assert "no script 'missing'" in caught.value.detail and "no script" not in str(caught.value)
    assert sleeps == []
