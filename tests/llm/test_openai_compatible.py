"""openai_compatible against real servers on loopback: the scripted fake over plain http (the operator's endpoint)
and over HTTPS through the hardened client (tenant base_urls)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.llm import FakeLLM, Fault, ToolCall, calls, raw, text
from kagent.models import EgressEvent
from kagent.secrets import secret_put
from llm import providers
from llm.types import Message, ModelError, ModelResponse, ToolCallRequest, Usage
from tests.conftest import Tenant
from tests.llm.conftest import ORDER_STATUS, TENANT_KEY, make_request, user


def order_conversation() -> list[Message]:
    """A user turn, one tool round (a call and its result), and a notice from K-Agent."""
    return [
        user("Where is order 8812?"),
        Message(
            role="assistant",
            tool_calls=(ToolCallRequest(id="call_a", name="order_status", arguments='{"order_number": "8812"}'),),
        ),
        Message(role="tool", tool_call_id="call_a", name="order_status", content='{"ok": true, "status": "shipped"}'),
        Message(role="notice", content="Answer only with what the tools returned."),
    ]


# --- openai_compatible, the operator's endpoint (plain http) ------------------------------------------------------


def test_openai_request_carries_transcript_tools_and_settings(fake_llm: FakeLLM, sleeps: list[float]) -> None:
    fake_llm.script("mapping", [text("unused"), text("Order 8812 has shipped.", usage=(321, 7))])
    model = {"provider": "openai_compatible", "name": "script:mapping", "temperature": 0.2, "max_output_tokens": 300}

    response = providers.complete(make_request(model, order_conversation()))

    assert response == ModelResponse(text="Order 8812 has shipped.", usage=Usage(321, 7), model_name="script:mapping")
    sent = fake_llm.last_request("mapping")
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer fake-operator-key"
    assert sent.body["messages"] == [
        {"role": "system", "content": "You answer questions about orders."},
        {"role": "user", "content": "Where is order 8812?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "order_status", "arguments": '{"order_number": "8812"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": '{"ok": true, "status": "shipped"}'},
        # Notices go as user text: some servers reject a second system message mid-conversation.
        {"role": "user", "content": "[K-Agent notice] Answer only with what the tools returned."},
    ]
    assert sent.body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "order_status",
            "description": ORDER_STATUS.description,
            "parameters": ORDER_STATUS.parameters,
        },
    }
    assert sent.tool_names == ["order_status", "transfer_to_human"]
    assert sent.tool_choice == "auto"
    assert sent.body["temperature"] == 0.2
    assert sent.body["max_tokens"] == 300
    assert sent.new_tool_results == [{"tool_call_id": "call_a", "content": '{"ok": true, "status": "shipped"}'}]
    assert sleeps == []


def test_openai_tool_calls_are_parsed(fake_llm: FakeLLM) -> None:
    fake_llm.script(
        "two-calls",
        [
            calls(
                ("order_status", {"order_number": "8812"}),
                ToolCall("transfer_to_human", '{"reason_type": "complaint", "summary": "Late parcel"}'),
            )
        ],
    )
    model = {"provider": "openai_compatible", "name": "script:two-calls"}

    response = providers.complete(make_request(model, [user("Where is 8812? I want a person.")]))

    assert response.text == ""  # content: null
    assert response.tool_calls == (
        ToolCallRequest(id="call_two-calls_0_0", name="order_status", arguments='{"order_number": "8812"}'),
        ToolCallRequest(
            id="call_two-calls_0_1",
            name="transfer_to_human",
            arguments='{"reason_type": "complaint", "summary": "Late parcel"}',
        ),
    )
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


def test_openai_odd_answers_are_read_robustly(fake_llm: FakeLLM) -> None:
    # What real servers send: no arguments, arguments as an object (Ollama), no call id, no usage, content null.
    fake_llm.script(
        "odd",
        [
            raw(
                {
                    "choices": [
                        {
                            "message": {
                                "role": "assistant",
                                "content": None,
                                "tool_calls": [
                                    {"id": "c1", "type": "function", "function": {"name": "order_status"}},
                                    {"type": "function", "function": {"name": "lookup", "arguments": {"q": "٨٨١٢"}}},
                                    {"id": "c3", "type": "function", "function": {"name": "x", "arguments": ""}},
                                    {"id": "c4", "type": "function", "function": {"arguments": "{}"}},
                                ],
                            }
                        }
                    ]
                }
            )
        ],
    )
    request = make_request({"provider": "openai_compatible", "name": "script:odd"}, [user("hi")])

    response = providers.complete(request)

    assert response.text == ""
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("order_status", "{}"),
        ("lookup", '{"q": "٨٨١٢"}'),
        ("x", "{}"),
    ]  # the nameless call is dropped: nothing could answer it
    assert response.tool_calls[0].id == "c1"
    assert response.tool_calls[1].id.startswith("call_")
    assert providers.complete(request).tool_calls[1].id == response.tool_calls[1].id  # a stable fallback id
    assert response.usage == Usage(0, 0)
    assert response.model_name == "script:odd"


def test_openai_script_found_by_marker_and_operator_model_name(fake_llm: FakeLLM) -> None:
    marker = fake_llm.script("marker", [text("Hello!")])

    response = providers.complete(make_request({"provider": "openai_compatible"}, [user(f"{marker} hi")]))

    assert response.text == "Hello!"
    assert fake_llm.last_request().model == "fake-model"  # KAGENT_LLM_MODEL when the config names none


def test_tool_choice_none_keeps_the_tools_and_no_tools_sends_neither(fake_llm: FakeLLM) -> None:
    fake_llm.script("final", [text("Here is what I found.")])
    model = {"provider": "openai_compatible", "name": "script:final"}

    providers.complete(make_request(model, [user("hi")], tool_choice="none"))
    with_tools = fake_llm.last_request()
    providers.complete(make_request(model, [user("hi")], tools=()))
    without_tools = fake_llm.last_request()

    assert with_tools.tool_choice == "none"
    assert with_tools.tool_names == ["order_status", "transfer_to_human"]
    assert "tools" not in without_tools.body and "tool_choice" not in without_tools.body


def test_no_operator_endpoint_fails_at_once(sleeps: list[float], settings: Any) -> None:
    settings.KAGENT_LLM_BASE_URL = ""

    with pytest.raises(ModelError, match="default model service is not set up") as caught:
        providers.complete(make_request({"provider": "openai_compatible", "name": "m"}, [user("x")]))

    assert caught.value.retryable is False
    assert "KAGENT_LLM_BASE_URL" not in str(caught.value) and "KAGENT_LLM_BASE_URL" in caught.value.detail
    assert sleeps == []


def test_an_error_body_echoing_the_key_is_masked(fake_llm: FakeLLM, sleeps: list[float]) -> None:
    body = json.dumps({"error": {"message": "Incorrect API key provided: fake-operator-key"}})
    fake_llm.script("echo-key", [text("never", faults=[Fault(status=401, body=body)])])

    with pytest.raises(ModelError) as caught:
        providers.complete(make_request({"provider": "openai_compatible", "name": "script:echo-key"}, [user("x")]))

    # The operator's error body is for the server log only (masked there too); the tenant reads the status.
    assert str(caught.value) == "the default model service answered HTTP 401"
    assert "fake-operator-key" not in caught.value.detail
    assert "Incorrect API key provided: ****" in caught.value.detail


# --- The fake itself: stateless per conversation ------------------------------------------------------------------


def test_the_fake_answers_a_replayed_conversation_the_same_way(fake_llm: FakeLLM) -> None:
    # A run resumed after a worker crash sends the same transcript again and must get the same answer and ids.
    fake_llm.script("replay", [calls(("order_status", {"order_number": "8812"})), text("Shipped.")])
    model = {"provider": "openai_compatible", "name": "script:replay"}
    first = providers.complete(make_request(model, [user("8812?")]))
    again = providers.complete(make_request(model, [user("8812?")]))
    after_tool = providers.complete(
        make_request(
            model,
            [
                user("8812?"),
                Message(role="assistant", tool_calls=first.tool_calls),
                Message(role="tool", tool_call_id=first.tool_calls[0].id, content='{"ok": true}'),
            ],
        )
    )

    assert first == again
    assert first.tool_calls[0].id == "call_replay_0_0"
    assert after_tool.text == "Shipped."
    assert [r.turn for r in fake_llm.requests("replay")] == [0, 0, 1]


# --- Tenant base_url: only through the hardened client ------------------------------------------------------------


def tenant_model(**overrides: Any) -> dict[str, Any]:
    return {
        "provider": "openai_compatible",
        "name": "script:tenant",
        "base_url": "https://llm.test:8443/v1",
        "api_key_secret": "LLM_KEY",
        **overrides,
    }


@pytest.fixture
def tenant_secret(alice: Tenant) -> Iterator[Tenant]:
    secret_put(project=alice.project, name="LLM_KEY", value=TENANT_KEY, allowed_hosts=["llm.test"])
    yield alice


def test_tenant_base_url_goes_through_the_hardened_client(
    fake_llm_tls: FakeLLM, fake_llm: FakeLLM, tenant_secret: Tenant, sleeps: list[float]
) -> None:
    fake_llm_tls.script("tenant", [text("From the tenant's model.", faults=[Fault(status=502)])])
    request = make_request(tenant_model(), [user("hi")], project_id=tenant_secret.project.id)

    response = providers.complete(request)

    assert response.text == "From the tenant's model."
    sent = fake_llm_tls.last_request("tenant")
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {TENANT_KEY}"
    assert sent.headers["user-agent"] == "K-Agent/1"
    # Signed like every call to a tenant URL, verifiable with any Standard Webhooks library.
    from standardwebhooks import Webhook

    from kagent.models import SigningSecret
    from kagent.secrets import signing_secrets_valid

    [secret] = signing_secrets_valid(project=tenant_secret.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    Webhook(secret).verify(sent.raw_body, sent.headers)
    assert fake_llm.requests() == []  # never the operator's endpoint, never its key
    assert len(sleeps) == 1  # the 502 was retried
    events = EgressEvent.objects.filter(project=tenant_secret.project, purpose="model").order_by("created_at")
    assert [(e.host, e.decision, e.status) for e in events] == [
        ("llm.test", "allowed", 502),
        ("llm.test", "allowed", 200),
    ]


def test_tenant_key_secret_missing_is_refused(fake_llm_tls: FakeLLM, alice: Tenant, sleeps: list[float]) -> None:
    fake_llm_tls.script("tenant", [text("never")])

    with pytest.raises(ModelError, match="secret LLM_KEY .* does not exist") as caught:
        providers.complete(make_request(tenant_model(), [user("hi")], project_id=alice.project.id))

    assert caught.value.retryable is False
    assert fake_llm_tls.requests() == [] and sleeps == []


def test_tenant_key_is_only_sent_to_its_allowed_hosts(
    fake_llm_tls: FakeLLM, alice: Tenant, sleeps: list[float]
) -> None:
    secret_put(project=alice.project, name="LLM_KEY", value=TENANT_KEY, allowed_hosts=["api.example.com"])
    fake_llm_tls.script("tenant", [text("never")])

    with pytest.raises(ModelError, match="may not be sent to llm.test") as caught:
        providers.complete(make_request(tenant_model(), [user("hi")], project_id=alice.project.id))

    assert caught.value.retryable is False
    assert TENANT_KEY not in str(caught.value)
    assert fake_llm_tls.requests() == [] and sleeps == []


def test_tenant_base_url_on_an_internal_address_is_refused(
    fake_llm_tls: FakeLLM, alice: Tenant, sleeps: list[float], settings: Any
) -> None:
    settings.KAGENT_EGRESS_RESOLVE += " internal.test:8443:127.0.0.1"
    secret_put(project=alice.project, name="LLM_KEY", value=TENANT_KEY, allowed_hosts=["internal.test"])

    with pytest.raises(ModelError, match="address_not_allowed") as caught:
        providers.complete(
            make_request(
                tenant_model(base_url="https://internal.test:8443/v1"), [user("hi")], project_id=alice.project.id
            )
        )

    assert caught.value.retryable is False  # a policy refusal is final: no retries
    assert sleeps == []
    assert EgressEvent.objects.get(project=alice.project, purpose="model").decision == "refused"


def test_tenant_base_url_over_plain_http_is_refused_even_to_a_live_server(
    fake_llm: FakeLLM, alice: Tenant, sleeps: list[float]
) -> None:
    # The config schema demands https, but the provider must not rely on it: an http tenant URL never goes out.
    secret_put(project=alice.project, name="LLM_KEY", value=TENANT_KEY, allowed_hosts=["127.0.0.1"])
    fake_llm.script("tenant", [text("never")])

    with pytest.raises(ModelError, match="base_url is not allowed"):
        providers.complete(
            make_request(tenant_model(base_url=fake_llm.base_url), [user("hi")], project_id=alice.project.id)
        )

    assert fake_llm.requests() == [] and sleeps == []
