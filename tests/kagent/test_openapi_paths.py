"""Every endpoint the dashboard's pages have an API twin of is in the OpenAPI document, with its filters."""

from __future__ import annotations

import json

import pytest

ENDPOINTS = {
    "/v1/runs": {"get": "runs_list", "post": "runs_create"},
    "/v1/sessions": {"get": "sessions_list", "post": "sessions_create"},
    "/v1/handoffs/{handoff_id}": {"get": "handoffs_retrieve", "patch": "handoffs_update"},
    "/v1/tools/{name}/preview": {"post": "tools_preview"},
    "/v1/tools/{name}/test": {"post": "tools_test"},
    "/v1/tool_drafts/preview": {"post": "tool_drafts_preview"},
    "/v1/tool_drafts/test": {"post": "tool_drafts_test"},
    "/v1/egress_events": {"get": "egress_events_list"},
    "/v1/agents/{agent_id}/versions/{number}/diff/{other}": {"get": "agents_versions_diff"},
    "/v1/agents/{agent_id}/versions/{number}/restore": {"post": "agents_versions_restore"},
    "/v1/webhook_endpoints": {"get": "webhook_endpoints_list", "post": "webhook_endpoints_create"},
    "/v1/webhook_endpoints/{endpoint_id}": {
        "get": "webhook_endpoints_retrieve",
        "patch": "webhook_endpoints_update",
        "delete": "webhook_endpoints_delete",
    },
    "/v1/webhook_endpoints/{endpoint_id}/rotate_secret": {"post": "webhook_endpoints_rotate_secret"},
    "/v1/webhook_endpoints/{endpoint_id}/deliveries": {"get": "webhook_deliveries_list"},
    "/v1/webhook_endpoints/{endpoint_id}/deliveries/{delivery_id}/redeliver": {"post": "webhook_deliveries_redeliver"},
}


@pytest.mark.django_db
def test_new_endpoints_are_documented(client):
    doc = json.loads(client.get("/v1/openapi.json").content)
    for path, operations in ENDPOINTS.items():
        assert path in doc["paths"], path
        for method, operation_id in operations.items():
            assert doc["paths"][path][method]["operationId"] == operation_id, (path, method)
    run_filters = {p["name"] for p in doc["paths"]["/v1/runs"]["get"]["parameters"]}
    assert {"agent", "status", "end_user", "created_after", "created_before", "sandbox"} <= run_filters
    session_filters = {p["name"] for p in doc["paths"]["/v1/sessions"]["get"]["parameters"]}
    assert {"agent", "status", "flagged", "end_user", "created_after", "created_before"} <= session_filters
    assert {p["name"] for p in doc["paths"]["/v1/egress_events"]["get"]["parameters"]} >= {"decision"}
    schemas = doc["components"]["schemas"]
    for name in (
        "EgressEvent",
        "ToolPreview",
        "ToolTestCall",
        "AgentVersionDiff",
        "WebhookEndpoint",
        "WebhookEndpointWithSecret",
        "WebhookDelivery",
        "WebhookEvent",
    ):
        assert name in schemas, name
    preview_body = doc["paths"]["/v1/tool_drafts/preview"]["post"]["requestBody"]["content"]["application/json"]
    assert "tool" in preview_body["schema"]["required"]


def _patterns(node):
    """Every body and query pattern (a path parameter's is its URL converter's, which Django matches whole)."""
    if isinstance(node, dict):
        if node.get("in") == "path":
            return
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            else:
                yield from _patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns(value)


def test_the_documents_patterns_are_ecma_and_refuse_a_trailing_newline(client):
    # A client generated from the document validates with ECMA-262 regular expressions (no `\Z`: in a JavaScript
    # pattern it is a plain "Z"); the server validates with Python's, where a bare `$` also matches before a final
    # newline. `(?!\n)$` means "the end" in both.
    import re

    doc = json.loads(client.get("/v1/openapi.json").content)
    patterns = set(_patterns(doc))
    assert len([p for p in patterns if p.endswith("$")]) >= 3
    for pattern in patterns:
        assert "\\Z" not in pattern, pattern
        if pattern.endswith("$"):
            assert pattern.endswith("(?!\\n)$"), pattern
    name = next(p for p in patterns if p.startswith("^[a-z][a-z0-9_]{0,29}"))
    assert re.search(name, "order_status") and not re.search(name, "order_status\n")


@pytest.mark.django_db
def test_the_document_describes_the_api_not_its_code(client):
    # A view's docstring is for the code's readers: the document says only what `extend_schema` describes (it once
    # showed ProjectApi's notes on most operations, and "as RunCreateApi has it" on `POST /v1/runs`).
    doc = json.loads(client.get("/v1/openapi.json").content)
    described = {}
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            text = operation.get("description", "") if isinstance(operation, dict) else ""
            assert "Api" not in text.replace("API", "") and "self." not in text and "subclass" not in text, (path, text)
            described[f"{method.upper()} {path}"] = text
    assert described["POST /v1/runs"].startswith("Starts a run")
