"""Model providers against real servers on loopback: the scripted fake over plain http (the operator's endpoint) and
over HTTPS through the hardened client (tenant base_urls, anthropic); and the offline demo model."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.llm import FakeLLM, Fault, ToolCall, calls, raw, text
from kagent.models import EgressEvent
from kagent.secrets import secret_put
from runs import providers
from runs.llm import Message, ModelError, ModelRequest, ModelResponse, ToolCallRequest, ToolDefinition, Usage
from runs.providers import retry
from tests.conftest import Tenant, wait_for
from tools.builtins import CREATE_TICKET, TRANSFER_TO_HUMAN

TENANT_KEY = "sk-tenant-0123456789abcdef"
ORDER_STATUS = ToolDefinition(
    name="order_status",
    description="Look up the shipping status of an order by its order number.",
    parameters={
        "type": "object",
        "properties": {"order_number": {"type": "string", "pattern": "^[0-9]{4,10}$", "description": "The number"}},
        "required": ["order_number"],
        "additionalProperties": False,
    },
)
TRANSFER = ToolDefinition(TRANSFER_TO_HUMAN.name, TRANSFER_TO_HUMAN.description, TRANSFER_TO_HUMAN.parameters)
TICKET = ToolDefinition(CREATE_TICKET.name, CREATE_TICKET.description, CREATE_TICKET.parameters)


def make_request(
    model: dict[str, Any],
    messages: list[Message],
    *,
    tools: tuple[ToolDefinition, ...] = (ORDER_STATUS, TRANSFER),
    tool_choice: str = "auto",
    system: str = "You answer questions about orders.",
    project_id: str = "proj_test",
) -> ModelRequest:
    return ModelRequest(
        system=system,
        messages=tuple(messages),
        tools=tools,
        tool_choice=tool_choice,  # type: ignore[arg-type]
        model=model,
        project_id=project_id,
        run_id="run_test",
    )


def user(content: str) -> Message:
    return Message(role="user", content=content)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff waits `complete` asked for, instead of sleeping them."""
    waits: list[float] = []
    monkeypatch.setattr(retry, "SLEEP", waits.append)
    return waits


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
    assert "injected fault 400" in str(caught.value)
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
    assert "did not answer within 0.5s" in str(caught.value)
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
    assert "could not reach the model endpoint" in str(caught.value)
    assert len(sleeps) == 2


def test_no_operator_endpoint_fails_at_once(sleeps: list[float], settings: Any) -> None:
    settings.KAGENT_LLM_BASE_URL = ""

    with pytest.raises(ModelError, match="KAGENT_LLM_BASE_URL") as caught:
        providers.complete(make_request({"provider": "openai_compatible", "name": "m"}, [user("x")]))

    assert caught.value.retryable is False
    assert sleeps == []


def test_an_error_body_echoing_the_key_is_masked(fake_llm: FakeLLM, sleeps: list[float]) -> None:
    body = json.dumps({"error": {"message": "Incorrect API key provided: fake-operator-key"}})
    fake_llm.script("echo-key", [text("never", faults=[Fault(status=401, body=body)])])

    with pytest.raises(ModelError) as caught:
        providers.complete(make_request({"provider": "openai_compatible", "name": "script:echo-key"}, [user("x")]))

    assert "fake-operator-key" not in str(caught.value)
    assert "Incorrect API key provided: ****" in str(caught.value)


def test_unknown_provider_and_unknown_script_are_not_retried(fake_llm: FakeLLM, sleeps: list[float]) -> None:
    with pytest.raises(ModelError, match="unknown model provider"):
        providers.complete(make_request({"provider": "gpt5"}, [user("x")]))
    with pytest.raises(ModelError, match="no script 'missing'"):
        providers.complete(make_request({"provider": "openai_compatible", "name": "script:missing"}, [user("x")]))
    assert sleeps == []


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


# --- anthropic ----------------------------------------------------------------------------------------------------


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


# --- demo ---------------------------------------------------------------------------------------------------------

DEMO = {"provider": "demo"}
TRACK = ToolDefinition(
    name="track_shipment",
    description="تتبع الشحنة برقم الطلب",
    parameters={
        "type": "object",
        "properties": {"order_number": {"type": "string", "pattern": "^[0-9]{4,10}$"}},
        "required": ["order_number"],
    },
)


def only_call(response: ModelResponse) -> tuple[str, dict[str, Any]]:
    assert len(response.tool_calls) == 1
    return response.tool_calls[0].name, json.loads(response.tool_calls[0].arguments)


def test_demo_picks_the_tool_the_words_match_and_fills_its_arguments() -> None:
    response = providers.complete(make_request(DEMO, [user("Where is my order 8812?")], tools=(ORDER_STATUS, TRANSFER)))

    assert only_call(response) == ("order_status", {"order_number": "8812"})
    assert response.text == ""
    assert response.model_name == "demo"


def test_demo_fills_enums_from_the_message_or_takes_the_first() -> None:
    tools = (ORDER_STATUS, TICKET, TRANSFER)
    complaint = "I have a complaint, connect me to a human"
    asked = providers.complete(make_request(DEMO, [user("Let me talk to a human")], tools=tools))
    with_complaint = providers.complete(make_request(DEMO, [user(complaint)], tools=tools))

    assert only_call(asked) == (
        "transfer_to_human",
        {"reason_type": "customer_requested", "summary": "Let me talk to a human"},
    )
    assert only_call(with_complaint) == ("transfer_to_human", {"reason_type": "complaint", "summary": complaint})


def test_demo_fills_required_strings_and_only_clear_optional_ones() -> None:
    message = "Please open a ticket, it is urgent: the parcel for order 8812 arrived damaged " + "and broken " * 20
    response = providers.complete(make_request(DEMO, [user(message)], tools=(ORDER_STATUS, TICKET, TRANSFER)))

    name, args = only_call(response)
    assert name == "create_ticket"
    normalized = " ".join(message.split())
    assert args == {"title": normalized[:120], "description": normalized, "priority": "urgent"}


def test_demo_reads_arabic() -> None:
    response = providers.complete(make_request(DEMO, [user("أريد تتبع الشحنة رقم ٨٨١٢")], tools=(TRACK, TRANSFER)))

    assert only_call(response) == ("track_shipment", {"order_number": "8812"})


def test_demo_small_talk_calls_no_tool_and_says_it_is_a_demo() -> None:
    for words in ("Hello! How are you today?", "thanks", "مرحبا"):
        response = providers.complete(make_request(DEMO, [user(words)]))
        assert response.tool_calls == ()
        assert response.text.startswith("(Demo model)")
        assert "demo model" in response.text


def test_demo_with_tools_disabled_answers_in_text() -> None:
    response = providers.complete(make_request(DEMO, [user("Where is my order 8812?")], tool_choice="none"))

    assert response.tool_calls == ()
    assert response.text.startswith("(Demo model)")


def test_demo_summarizes_a_result_and_calls_at_most_one_tool_per_turn() -> None:
    conversation = [
        user("Where is my order 8812?"),
        Message(
            role="assistant",
            tool_calls=(ToolCallRequest(id="c1", name="order_status", arguments='{"order_number": "8812"}'),),
        ),
        Message(
            role="tool",
            tool_call_id="c1",
            name="order_status",
            content='{"ok": true, "data": {"status": "shipped", "eta": "2026-01-02"}}',
        ),
    ]

    response = providers.complete(make_request(DEMO, conversation))

    assert response.tool_calls == ()  # the user's words still match order_status, but this turn already called it
    assert response.text == "(Demo model) The order_status tool answered: status: shipped; eta: 2026-01-02."


def test_demo_says_a_failed_tool_failed() -> None:
    conversation = [
        user("Please open a ticket: my parcel arrived damaged"),
        Message(role="assistant", tool_calls=(ToolCallRequest(id="c1", name="create_ticket", arguments="{}"),)),
        Message(
            role="tool",
            tool_call_id="c1",
            name="create_ticket",
            content=json.dumps(
                {"ok": False, "error": {"code": "rate_limited", "guidance": "Too many tickets today; try tomorrow."}}
            ),
        ),
    ]

    response = providers.complete(make_request(DEMO, conversation, tools=(TICKET,)))

    assert response.text.startswith("(Demo model)")
    assert "did not work (rate_limited)" in response.text
    assert "can't confirm" in response.text
    assert "TKT-" not in response.text and "opened" not in response.text


def test_demo_marks_a_simulated_action() -> None:
    conversation = [
        user("open a ticket"),
        Message(role="assistant", tool_calls=(ToolCallRequest(id="c1", name="create_ticket", arguments="{}"),)),
        Message(role="tool", tool_call_id="c1", name="create_ticket", content='{"ok": true, "simulated": true}'),
    ]

    response = providers.complete(make_request(DEMO, conversation, tools=(TICKET,)))

    assert (
        response.text == "(Demo model) The create_ticket tool answered (simulated: nothing was sent) with no details."
    )


def test_demo_is_deterministic_and_ignores_tool_order() -> None:
    request = make_request(
        DEMO, [user("I want a human, my order 8812 is late")], tools=(ORDER_STATUS, TICKET, TRANSFER)
    )
    reordered = make_request(DEMO, list(request.messages), tools=(TRANSFER, TICKET, ORDER_STATUS))

    first = providers.complete(request)

    assert providers.complete(request) == first
    assert providers.complete(reordered) == first
    assert first.usage.input_tokens == len(request.system.split()) + len(request.messages[0].content.split())
    assert first.usage.output_tokens > 0


def test_demo_does_not_run_a_catastrophic_tenant_pattern() -> None:
    # A tenant's HTTP tool schema may hold any pattern; matching it against the user's words must stay fast.
    evil = ToolDefinition(
        name="lookup_code",
        description="Look up a code.",
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}},
            "required": ["code"],
        },
    )
    started = time.monotonic()

    response = providers.complete(make_request(DEMO, [user("lookup code " + "a" * 39 + "b")], tools=(evil,)))

    assert time.monotonic() - started < 1
    assert only_call(response)[0] == "lookup_code"
