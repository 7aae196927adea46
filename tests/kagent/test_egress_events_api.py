"""`GET /v1/egress_events`: the project's outbound calls and refusals, newest first, filtered by decision, purpose,
host and time; a refused address is never shown; someone else's project sees none of it."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from kagent.models import EgressEvent
from tests.kagent.test_auth import error

pytestmark = pytest.mark.django_db


def event(tenant, **fields):
    values = {
        "project": tenant.project,
        "purpose": "http_tool",
        "method": "GET",
        "host": "api.example.com",
        "port": 443,
        "path": "/orders/8812",
        "resolved_address": "93.184.216.34",
        "decision": "allowed",
        "status": 200,
        "bytes_received": 120,
        "duration_ms": 35,
    }
    values.update(fields)
    return EgressEvent.objects.create(**values)


def ids(response):
    assert response.status_code == 200, response.json()
    return [item["id"] for item in response.json()["data"]]


def test_list_filters_and_renders(alice, api):
    model = event(
        alice, purpose="model", host="llm.example.com", created_at=timezone.now() - datetime.timedelta(days=2)
    )
    allowed = event(alice)
    refused = event(
        alice,
        host="internal.test",
        decision="refused",
        code="address_not_allowed",
        resolved_address="10.0.0.5",
        status=None,
    )
    assert ids(api.get("/v1/egress_events")) == [f"egress_{refused.pk}", f"egress_{allowed.pk}", f"egress_{model.pk}"]
    assert ids(api.get("/v1/egress_events?decision=refused")) == [f"egress_{refused.pk}"]
    assert ids(api.get("/v1/egress_events?purpose=model")) == [f"egress_{model.pk}"]
    assert ids(api.get("/v1/egress_events?host=api.example.com")) == [f"egress_{allowed.pk}"]
    yesterday = (timezone.now() - datetime.timedelta(days=1)).date().isoformat()
    assert ids(api.get(f"/v1/egress_events?created_before={yesterday}")) == [f"egress_{model.pk}"]

    data = {item["id"]: item for item in api.get("/v1/egress_events").json()["data"]}
    shown = data[f"egress_{allowed.pk}"]
    assert shown["object"] == "egress_event"
    assert (shown["decision"], shown["status"], shown["resolved_address"], shown["code"]) == (
        "allowed",
        200,
        "93.184.216.34",
        None,
    )
    hidden = data[f"egress_{refused.pk}"]
    assert hidden["code"] == "address_not_allowed"
    assert hidden["resolved_address"] is None  # what a name resolved to inside our network stays inside


def test_pagination_with_its_own_cursor(alice, api):
    made = [event(alice, path=f"/{n}") for n in range(5)]
    page = api.get("/v1/egress_events?limit=2").json()
    assert [item["path"] for item in page["data"]] == ["/4", "/3"]
    assert page["next"] == f"egress_{made[3].pk}"
    rest = api.get(f"/v1/egress_events?limit=10&cursor={page['next']}").json()
    assert [item["path"] for item in rest["data"]] == ["/2", "/1", "/0"]
    assert rest["next"] is None
    assert error(api.get("/v1/egress_events?cursor=run_1")) == "invalid_parameter"


@pytest.mark.parametrize("query", ["decision=maybe", "purpose=ftp", "created_after=soon"])
def test_bad_filters_are_422(api, query):
    response = api.get(f"/v1/egress_events?{query}")
    assert response.status_code == 422
    assert error(response) == "invalid_parameter"


def test_someone_elses_log_is_not_shown(alice, bob, api):
    event(alice)
    event(alice, project=None)  # an operator's own call (the default model endpoint): no project's
    assert ids(bob.client().get("/v1/egress_events")) == []
    assert len(ids(api.get("/v1/egress_events"))) == 1
    publishable = alice.client(alice.publishable_key).get("/v1/egress_events")
    assert error(publishable) == "publishable_key_not_allowed"


def test_a_name_that_does_not_resolve_reads_as_one_on_our_network(alice, api):
    """Second security review, item 9: otherwise a tenant learns which internal names exist (an internal name
    resolves to a private address: address_not_allowed; a made-up one doesn't resolve). The row keeps the real code
    for the operator."""
    missing = event(alice, host="nothing.internal.corp", decision="refused", code="dns_failed")
    private = event(alice, host="db.internal.corp", decision="refused", code="address_not_allowed")
    shown = {e["host"]: e["code"] for e in api.get("/v1/egress_events").json()["data"]}
    assert shown["nothing.internal.corp"] == shown["db.internal.corp"] == "address_not_allowed"
    missing.refresh_from_db()
    assert (missing.code, private.code) == ("dns_failed", "address_not_allowed")


def test_an_mcp_servers_calls_are_found_by_their_purpose(alice, api):
    mcp = event(alice, purpose="mcp", host="mcp.example.com")
    event(alice, purpose="http_tool")
    assert ids(api.get("/v1/egress_events?purpose=mcp")) == [f"egress_{mcp.pk}"]
