"""What tenants and browsers read of a failure (issue #13, finding 4): a code to act on (`address_not_allowed`,
`dns_failed`, `upstream_failed`, …) and neutral words; never an address of our network, what a name resolved to, the
deny list's ranges or what the operator's model endpoint said. The full reason stays in the egress log and the
server log."""

from __future__ import annotations

import json
import logging

import pytest

from fakes.llm import Fault, calls, text
from kagent.egress import EgressError, tenant_code, tenant_message
from kagent.models import EgressEvent
from kagent.secrets import secret_put
from runs.models import ToolCall
from tests.runs.conftest import VERIFIED
from tests.runs.test_http_tools import order_tool, setup_tool

pytestmark = pytest.mark.django_db

NETWORK_DETAIL = ("127.0.0.1", "10.0.0.5", "denied range", "10.0.0.0/8", "127.0.0.0/8", "embeds")


def read_as_browser(h, run_id):
    """The run as a browser holding the publishable key reads it."""
    response = h.tenant.client(h.tenant.publishable_key).get(f"/v1/runs/{run_id}")
    assert response.status_code == 200, response.json()
    return response.json()


def tenant_model(host: str) -> dict:
    return {"provider": "openai_compatible", "name": "m", "base_url": f"https://{host}:8443/v1", "api_key_secret": "K"}


@pytest.mark.parametrize(("host", "address"), [("internal.test", "127.0.0.1"), ("private.test", "10.0.0.5")])
def test_a_model_base_url_on_our_network_is_a_code_not_a_map(h, egress_settings, caplog, host, address):
    secret_put(project=h.tenant.project, name="K", value="tenant-model-key-0123456789", allowed_hosts=[host])
    agent = h.agent("base-url", model=tenant_model(host))
    run_id = h.start(agent, key=h.tenant.publishable_key)["id"]
    with caplog.at_level(logging.WARNING):
        h.drive(run_id)

    run = read_as_browser(h, run_id)
    assert run["status"] == "failed" and run["last_error"]["code"] == "model_error"
    # A visitor is told the assistant couldn't answer; not the model's host, not the secret's name.
    assert run["last_error"]["message"] == "The assistant could not answer just now. Please try again."
    assert host not in json.dumps(run) and '"K"' not in json.dumps(run["last_error"])
    # The business, with its secret key, reads the code to act on: never an address of ours.
    business = h.get(run_id)
    message = business["last_error"]["message"]
    assert "address_not_allowed" in message
    assert not [detail for detail in NETWORK_DETAIL if detail in json.dumps(business)], message
    # The full reason is the operator's: in the egress log and the server log.
    event = EgressEvent.objects.get(project=h.tenant.project, purpose="model")
    assert (event.code, event.resolved_address) == ("address_not_allowed", address)
    assert f"{address} is in denied range" in caplog.text


def test_the_operator_endpoints_error_body_stays_in_the_server_log(h, caplog):
    body = json.dumps({"error": {"message": "upstream vllm-7.gpu.internal.corp:8000 has no model 'x'"}})
    agent = h.agent("operator-body", [text("never", faults=[Fault(status=400, body=body)])])
    with caplog.at_level(logging.WARNING):
        run = h.drive(h.start(agent, key=h.tenant.publishable_key)["id"])
    assert read_as_browser(h, run["id"])["last_error"] == {
        "code": "model_error",
        "message": "The assistant could not answer just now. Please try again.",
    }
    run = h.get(run["id"])
    assert run["last_error"]["code"] == "model_error"
    assert "internal.corp" not in run["last_error"]["message"] and "vllm" not in run["last_error"]["message"]
    assert run["last_error"]["message"] == "The model could not answer: the default model service answered HTTP 400"
    assert "vllm-7.gpu.internal.corp" in caplog.text


def test_http_tool_steps_never_show_the_resolved_address(h, upstream, egress_settings):
    setup_tool(h, upstream)
    internal_tool = order_tool(name="order_status_internal")
    internal_tool["config"]["url"] = internal_tool["config"]["url"].replace("tools.test", "internal.test")
    secret = {"value": "x" * 20, "allowed_hosts": ["tools.test", "internal.test"]}
    assert h.api.put("/v1/secrets/ORDERS_TOKEN", secret, format="json").status_code == 200
    response = h.api.post("/v1/tools", internal_tool, format="json")
    assert response.status_code == 201, response.json()
    agent = h.agent(
        "steps-address",
        [
            calls(("order_status", {"order_number": "8812"}), ("order_status_internal", {"order_number": "8812"})),
            text("Done looking."),
        ],
        tools={"http": [{"tool": "order_status"}, {"tool": "order_status_internal"}]},
    )
    run = h.run(agent, "where is 8812?", **VERIFIED)
    calls_seen = {c["name"]: c for c in h.tool_steps(run["id"])}
    assert calls_seen["order_status"]["upstream"]["status"] == 200
    assert calls_seen["order_status_internal"]["upstream"]["error_code"] == "address_not_allowed"
    steps_text = json.dumps(h.steps(run["id"]))
    assert "resolved_address" not in steps_text and upstream.host not in steps_text and "127.0.0.1" not in steps_text
    # Kept where the operator looks: the egress log.
    addresses = set(EgressEvent.objects.filter(project=h.tenant.project).values_list("resolved_address", flat=True))
    assert {upstream.host, "127.0.0.1"} <= addresses


def test_steps_written_before_the_change_are_read_without_the_address(h, upstream, egress_settings):
    setup_tool(h, upstream)
    agent = h.agent(
        "old-step",
        [calls(("order_status", {"order_number": "8812"})), text("ok")],
        tools={"http": [{"tool": "order_status"}]},
    )
    run = h.run(agent, "8812?", **VERIFIED)
    call = ToolCall.objects.get(run_id=run["id"])
    ToolCall.objects.filter(pk=call.pk).update(upstream={**call.upstream, "resolved_address": "10.96.3.4"})
    assert "10.96.3.4" not in json.dumps(h.steps(run["id"]))


@pytest.mark.parametrize(
    ("code", "shown"),
    [
        ("address_not_allowed", "address_not_allowed"),
        ("dns_failed", "address_not_allowed"),  # a name that doesn't resolve reads as one on our network
        ("url_not_allowed", "url_not_allowed"),
        ("connect_failed", "upstream_failed"),
        ("tls_failed", "upstream_failed"),
        ("timeout", "upstream_failed"),
        ("redirect_not_followed", "upstream_failed"),
        ("response_too_large", "upstream_failed"),
        ("bad_response", "upstream_failed"),
        ("egress_misconfigured", "upstream_failed"),
    ],
)
def test_every_egress_code_has_a_tenant_code_and_neutral_words(code, shown):
    error = EgressError(
        code, "redis.internal.corp: 10.96.3.4 is in denied range 10.0.0.0/8", resolved_address="10.96.3.4"
    )
    assert tenant_code(code) == shown
    assert tenant_message(error).startswith(f"{shown}: ")
    assert "10." not in tenant_message(error) and "redis" not in tenant_message(error)


def test_a_browser_follows_a_failed_run_without_its_detail(h):
    """The event stream a publishable key follows says the same neutral words as a read."""
    from tests.runs.test_run_events import events

    agent = h.agent("stream-fail", [text("never", faults=[Fault(status=400, body="{}")])])
    run_id = h.start(agent, key=h.tenant.publishable_key)["id"]
    h.drive(run_id)
    [failed] = [e for e in events(h.tenant.client(h.tenant.publishable_key), run_id) if e["event"] == "run.failed"]
    assert failed["data"]["last_error"]["message"] == "The assistant could not answer just now. Please try again."
    [failed] = [e for e in events(h.api, run_id) if e["event"] == "run.failed"]
    assert "HTTP 400" in failed["data"]["last_error"]["message"]


def test_a_publishable_key_runs_the_latest_version_only(h):
    agent = h.agent("pinned-old", [text("v1"), text("v2")])
    assert h.api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
    refused = h.tenant.client(h.tenant.publishable_key).post(
        "/v1/runs", {"agent": agent, "input": "hi", "version": 1}, format="json"
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "version_pin_requires_secret_key"
    assert h.start(agent, version=1)["version"] == 1  # the business's own server may pin
