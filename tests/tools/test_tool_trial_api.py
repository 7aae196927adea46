"""`POST /v1/tools/{name}/preview|test` and the same for a definition not yet saved (`/v1/tool_drafts/…`): the
rendered request with secrets masked, a live signed call through the hardened client showing what the steps record
beside what the model would see, the egress log, and someone else's project as a 404."""

from __future__ import annotations

import json

import pytest

from kagent.models import EgressEvent, SigningSecret
from kagent.secrets import signing_secrets_valid
from tests.examples import seed_order_status
from tests.kagent.test_auth import error

pytestmark = pytest.mark.django_db

TOKEN = "orders-token-0123456789-SECRET"
SAMPLE = {"arguments": {"order_number": "8812"}, "end_user": {"external_id": "cust-42", "traits": {"tier": "gold"}}}


def order_tool(host="api.example.com"):
    tool = seed_order_status()
    tool["config"]["url"] = (
        f"https://{host}/respond/order/customers/{{{{end_user.external_id}}}}/orders/{{{{args.order_number}}}}"
    )
    return tool


def put_secret(api, host="api.example.com"):
    response = api.put("/v1/secrets/ORDERS_TOKEN", {"value": TOKEN, "allowed_hosts": [host]}, format="json")
    assert response.status_code in (200, 201), response.json()


def test_preview_of_a_saved_tool_masks_secrets_and_sends_nothing(api, upstream):
    put_secret(api)
    assert api.post("/v1/tools", order_tool(), format="json").status_code == 201
    response = api.post("/v1/tools/order_status/preview", SAMPLE, format="json")
    assert response.status_code == 200, response.json()
    preview = response.json()
    assert preview["ok"] is True and preview["error"] is None
    request = preview["request"]
    assert request["method"] == "GET"
    assert request["url"] == "https://api.example.com/respond/order/customers/cust-42/orders/8812"
    assert TOKEN not in json.dumps(preview)
    assert request["headers"]["Authorization"].startswith("Bearer ") and "••••" in request["headers"]["Authorization"]
    assert request["body"] is None and request["timeout_ms"] == 8000
    assert upstream.received == []
    assert EgressEvent.objects.count() == 0


def test_preview_says_why_nothing_would_be_sent(api):
    put_secret(api)
    api.post("/v1/tools", order_tool(), format="json")
    anonymous = api.post("/v1/tools/order_status/preview", {"arguments": {"order_number": "8812"}}, format="json")
    assert anonymous.status_code == 200
    assert anonymous.json()["ok"] is False
    assert anonymous.json()["error"]["code"] == "verified_user_required"
    assert anonymous.json()["request"] is None
    bad = api.post("/v1/tools/order_status/preview", {**SAMPLE, "arguments": {"order_number": "../x"}}, format="json")
    assert bad.json()["error"]["code"] == "invalid_arguments"
    assert bad.json()["error"]["parameter"] == "order_number"
    missing = api.post("/v1/tools/order_status/preview", {**SAMPLE, "arguments": {}}, format="json")
    assert missing.json()["error"]["code"] == "invalid_arguments"


def test_preview_refuses_a_malformed_sample(api):
    api.post("/v1/tools", order_tool(), format="json")
    response = api.post("/v1/tools/order_status/preview", {"arguments": [1]}, format="json")
    assert response.status_code == 422
    assert error(response) == "invalid_sample"
    response = api.post("/v1/tools/order_status/preview", {"end_user": {"traits": {}}}, format="json")
    assert error(response) == "invalid_sample"
    assert error(api.post("/v1/tools/order_status/preview", {"extra": 1}, format="json")) == "invalid_sample"


def test_draft_preview_is_checked_as_a_write_first(api):
    put_secret(api)
    tool = order_tool()
    response = api.post("/v1/tool_drafts/preview", {"tool": tool, **SAMPLE}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["request"]["url"].endswith("/orders/8812")
    assert api.get("/v1/tools").json()["data"] == []  # nothing saved

    tool["config"]["headers"] = {"Host": "evil.example"}
    refused = api.post("/v1/tool_drafts/preview", {"tool": tool, **SAMPLE}, format="json")
    assert refused.status_code == 422
    assert error(refused) == "forbidden_header"
    assert refused.json()["error"]["details"][0]["path"] == "$.config.headers.Host"

    other_host = order_tool(host="other.example.com")
    refused = api.post("/v1/tool_drafts/preview", {"tool": other_host, **SAMPLE}, format="json")
    assert error(refused) == "secret_host_not_allowed"  # the same 422 a POST /v1/tools gives
    assert error(api.post("/v1/tools", other_host, format="json")) == "secret_host_not_allowed"
    assert error(api.post("/v1/tool_drafts/preview", {**SAMPLE}, format="json")) == "invalid_tool"
    assert error(api.post("/v1/tool_drafts/preview", {"tool": 5}, format="json")) == "invalid_tool"


def signed_by_the_project(alice, upstream):
    upstream.secrets = signing_secrets_valid(project=alice.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)


def test_test_call_shows_the_upstream_and_what_the_model_would_see(alice, api, upstream, egress_settings):
    put_secret(api, "tools.test")
    tool = order_tool(host="tools.test:8443")
    assert api.post("/v1/tools", tool, format="json").status_code == 201
    signed_by_the_project(alice, upstream)
    upstream.respond("order", json_body={"data": [{"status": "shipped", "eta": "Tuesday", "note": TOKEN}]})
    response = api.post("/v1/tools/order_status/test", SAMPLE, format="json")
    assert response.status_code == 200, response.json()
    result = response.json()
    assert result["ok"] is True
    assert result["shown_to_model"]["data"]["rows"] == [{"Status": "shipped", "Expected delivery": "Tuesday"}]
    assert result["upstream"]["status"] == 200
    assert result["upstream"]["host"] == "tools.test"
    assert '"shipped"' in result["upstream"]["body_excerpt"]
    assert TOKEN not in json.dumps(result)  # echoed back by the upstream, masked in the excerpt
    [received] = upstream.received
    assert received.headers["authorization"] == f"Bearer {TOKEN}"
    assert received.headers["webhook-id"].startswith("call_") and all(received.signature_valid)
    event = EgressEvent.objects.get(project=alice.project)
    assert event.decision == "allowed" and event.host == "tools.test"


def test_test_call_of_a_failing_upstream_and_of_a_draft(alice, api, upstream, egress_settings):
    put_secret(api, "tools.test")
    signed_by_the_project(alice, upstream)
    upstream.respond("order", status=503, json_body={"error": "maintenance"})
    tool = order_tool(host="tools.test:8443")
    response = api.post("/v1/tool_drafts/test", {"tool": tool, **SAMPLE}, format="json")
    assert response.status_code == 200, response.json()
    result = response.json()
    assert result["ok"] is False
    assert result["shown_to_model"]["error"]["code"] == "upstream_failed"
    assert result["upstream"]["status"] == 503
    assert "maintenance" in result["upstream"]["body_excerpt"]
    assert api.get("/v1/tools").json()["data"] == []


def test_a_refused_address_is_not_shown(api, upstream, egress_settings, internal):
    tool = seed_order_status(requires_verified_user=False)
    tool["config"].update(url="https://internal.test:8443/orders/{{args.order_number}}", headers={})
    response = api.post("/v1/tool_drafts/test", {"tool": tool, "arguments": {"order_number": "1"}}, format="json")
    result = response.json()
    assert result["ok"] is False
    assert result["upstream"]["error_code"] == "address_not_allowed"
    assert "resolved_address" not in result["upstream"]
    assert "127.0.0.1" not in json.dumps(result)


def test_someone_elses_tool_is_a_404(alice, bob, api):
    api.post("/v1/tools", order_tool(), format="json")
    other = bob.client()
    assert other.post("/v1/tools/order_status/preview", SAMPLE, format="json").status_code == 404
    assert other.post("/v1/tools/order_status/test", SAMPLE, format="json").status_code == 404
    assert api.post("/v1/tools/nope/preview", SAMPLE, format="json").status_code == 404


def test_a_publishable_key_can_not_preview(alice, api):
    api.post("/v1/tools", order_tool(), format="json")
    pk = alice.client(alice.publishable_key)
    assert error(pk.post("/v1/tools/order_status/preview", SAMPLE, format="json")) == "publishable_key_not_allowed"
    assert (
        error(pk.post("/v1/tool_drafts/test", {"tool": order_tool()}, format="json")) == "publishable_key_not_allowed"
    )
