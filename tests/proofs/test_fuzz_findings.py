"""What the fuzzer (test_fuzz.py) found, each kept as a plain test."""

from __future__ import annotations

import pytest

from kagent.ids import new_id

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("ask", [{"HTTP_ACCEPT": "text/event-stream"}, {"QUERY_STRING": "format=sse"}])
def test_an_event_stream_error_is_the_error_json_and_says_so(alice, ask):
    response = alice.client().get(f"/v1/runs/{new_id('run')}/events", **ask)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("path", ["/v1/tickets", "/v1/handoffs"])
def test_include_tests_on_the_desk_is_true_or_false(alice, path):
    api = alice.client()
    assert api.get(f"{path}?include_tests=true").status_code == 200
    assert api.get(f"{path}?include_tests=false").status_code == 200
    refused = api.get(f"{path}?include_tests=0.53")
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_parameter"


@pytest.mark.parametrize(
    ("path", "operation", "parameter"),
    [
        ("/v1/runs", "runs_list", "status"),
        ("/v1/sessions", "sessions_list", "status"),
        ("/v1/egress_events", "egress_events_list", "decision"),
    ],
)
def test_an_empty_filter_is_no_filter_and_the_document_says_so(alice, client, path, operation, parameter):
    assert alice.client().get(f"{path}?{parameter}=").status_code == 200
    assert alice.client().get(f"{path}?{parameter}=maybe").status_code == 422
    doc = client.get("/v1/openapi.json").json()
    [declared] = [p for p in doc["paths"][path]["get"]["parameters"] if p["name"] == parameter]
    assert {"type": "string", "maxLength": 0, "description": "empty: no filter"} in declared["schema"]["anyOf"]
