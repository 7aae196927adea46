"""anthropic against the scripted fake over HTTPS, through the hardened client."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.llm import FakeLLM, Fault, calls, text
from kagent.secrets import secret_put
from llm import providers
from llm.types import Message, ModelError, ToolCallRequest
from tests.conftest import Tenant
from tests.llm.conftest import ORDER_STATUS, TENANT_KEY, make_request, only_call, user


@pytest.fixture
def anthropic_secret(alice: Tenant) -> Tenant:
    secret_put(project=alice.project, name="ANTHROPIC_KEY", value=TENANT_KEY, allowed_hosts=["llm.test"])
    return alice


def anthropic_model(**overrides: Any) -> dict[str, Any]:
    return {
        "provider": "anthropic",
        "name": "script:claude",
        "base_url": "https://llm.test:8443",
        "api_key_secret": "ANTHROPIC_KEY",
        **overrides,
    }


def test_anthropic_request_and_answer_mapping(fake_llm_tls: FakeLLM, anthropic_secret: Tenant) -> None:
    fake_llm_tls.script(
        "claude",
        [
            text("unused"),
            calls(("create_ticket", {"title": "Order 8812 is late", "description": "Late."}), text="Opening one."),
        ],
    )
    transcript = [
        user("Where is 8812? And get me a person."),
        Message(
            role="assistant",
            content="Let me check.",
            tool_calls=(
                ToolCallRequest(id="c1", name="order_status", arguments='{"order_number": "8812"}'),
                ToolCallRequest(id="c2", name="transfer_to_human", arguments="not json"),
            ),
        ),
        Message(role="tool", tool_call_id="c1", name="order_status", content='{"ok": true, "status": "late"}'),
        Message(
            role="tool",
            tool_call_id="c2",
            name="transfer_to_human",
            content='{"ok": false, "error": {"code": "outside_business_hours", "guidance": "Closed now."}}',
        ),
        Message(role="notice", content="Say only what the tools returned."),
    ]
    request = make_request(anthropic_model(temperature=1.5), transcript, project_id=anthropic_secret.project.id)

    response = providers.complete(request)

    assert response.text == "Opening one."
    assert only_call(response) == ("create_ticket", {"title": "Order 8812 is late", "description": "Late."})
    assert response.tool_calls[0].id == "call_claude_1_0"
    assert response.usage.input_tokens > 0
    sent = fake_llm_tls.last_request("claude")
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == TENANT_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.body["system"] == "You answer questions about orders."
    assert sent.body["max_tokens"] == 1024
    assert sent.body["temperature"] == 1.0  # Anthropic's range ends at 1
    assert sent.body["tool_choice"] == {"type": "auto"}
    assert sent.body["tools"][0] == {
        "name": "order_status",
        "description": ORDER_STATUS.description,
        "input_schema": ORDER_STATUS.parameters,
    }
    assert sent.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Where is 8812? And get me a person."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "c1", "name": "order_status", "input": {"order_number": "8812"}},
                {"type": "tool_use", "id": "c2", "name": "transfer_to_human", "input": {}},
            ],
        },
        {  # both results and the notice merged into one user message, results first
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": '{"ok": true, "status": "late"}'},
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": '{"ok": false, "error": {"code": "outside_business_hours", "guidance": "Closed now."}}',
                    "is_error": True,
                },
                {"type": "text", "text": "[K-Agent notice] Say only what the tools returned."},
            ],
        },
    ]


def test_anthropic_tool_choice_none_and_max_tokens(fake_llm_tls: FakeLLM, anthropic_secret: Tenant) -> None:
    fake_llm_tls.script("claude", [text("Done talking.")])
    model = anthropic_model(max_output_tokens=200)

    providers.complete(make_request(model, [user("hi")], tool_choice="none", project_id=anthropic_secret.project.id))

    sent = fake_llm_tls.last_request("claude")
    assert sent.body["tool_choice"] == {"type": "none"}
    assert sent.body["max_tokens"] == 200


def test_anthropic_overloaded_is_retried(fake_llm_tls: FakeLLM, anthropic_secret: Tenant, sleeps: list[float]) -> None:
    fake_llm_tls.script("claude", [text("Back.", faults=[Fault(status=529)])])

    response = providers.complete(make_request(anthropic_model(), [user("hi")], project_id=anthropic_secret.project.id))

    assert response.text == "Back."
    assert len(sleeps) == 1


def test_anthropic_needs_a_key_secret_allowed_for_its_host(
    fake_llm_tls: FakeLLM, anthropic_secret: Tenant, sleeps: list[float]
) -> None:
    project_id = anthropic_secret.project.id
    with pytest.raises(ModelError, match="api_key_secret is required"):
        providers.complete(make_request(anthropic_model(api_key_secret=None), [user("hi")], project_id=project_id))
    # Without a base_url the key goes to api.anthropic.com, which this secret does not allow: nothing is sent.
    model = {"provider": "anthropic", "name": "claude-x", "api_key_secret": "ANTHROPIC_KEY"}
    with pytest.raises(ModelError, match="may not be sent to api.anthropic.com") as caught:
        providers.complete(make_request(model, [user("hi")], project_id=project_id))
    assert caught.value.retryable is False
    assert fake_llm_tls.requests() == [] and sleeps == []
