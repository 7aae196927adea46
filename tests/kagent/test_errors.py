"""Every error is the error JSON of SPEC §4, with a stable code and no traceback."""

import json

import pytest

from tests.kagent.test_auth import error


@pytest.mark.django_db
def test_unknown_endpoint_is_json_404(api):
    for path in ("/v1/nope", "/v1/agents/agt_x/nope", "/v1", "/v1/"):
        response = api.get(path)
        assert response.status_code == 404, path
        assert error(response) == "not_found"
    assert error(api.post("/v1/nope", {}, format="json")) == "not_found"


@pytest.mark.django_db
def test_unknown_object_is_json_404(api):
    response = api.get("/v1/agents/agt_doesnotexist")
    assert response.status_code == 404
    assert error(response) == "not_found"


@pytest.mark.django_db
def test_wrong_method_is_405(api):
    response = api.put("/v1/agents", {}, format="json")
    assert response.status_code == 405
    assert error(response) == "method_not_allowed"


@pytest.mark.django_db
def test_malformed_json_is_400(api):
    response = api.generic("POST", "/v1/agents", '{"name": "x",', content_type="application/json")
    assert response.status_code == 400
    assert error(response) == "invalid_json"


@pytest.mark.django_db
def test_body_that_is_not_an_object_is_400(api):
    for body in ("[1, 2]", '"text"', "42", "null"):
        response = api.generic("POST", "/v1/agents", body, content_type="application/json")
        assert response.status_code == 400, body
        assert error(response) == "invalid_request"


@pytest.mark.django_db
def test_wrong_content_type_is_415(api):
    response = api.generic("POST", "/v1/agents", "name=x", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert error(response) == "unsupported_media_type"


@pytest.mark.django_db
def test_bad_limit_is_400(api):
    for limit in ("0", "101", "abc", "-1"):
        response = api.get(f"/v1/agents?limit={limit}")
        assert response.status_code == 400
        assert error(response) == "invalid_parameter"


@pytest.mark.django_db
def test_unhandled_exception_is_500_without_traceback(api, monkeypatch):
    from agents import selectors

    def explode(**kwargs):
        raise RuntimeError("secret internals: /etc/passwd")

    # Fault injection: a selector that crashes.
    monkeypatch.setattr(selectors, "agent_list", explode)
    response = api.get("/v1/agents")
    assert response.status_code == 500
    assert error(response) == "internal_error"
    text = response.content.decode()
    assert "Traceback" not in text and "secret internals" not in text and "RuntimeError" not in text


@pytest.mark.django_db
def test_openapi_document_and_docs(client):
    response = client.get("/v1/openapi.json")
    assert response.status_code == 200
    doc = json.loads(response.content)
    assert doc["openapi"].startswith("3.1")
    assert "/v1/agents" in doc["paths"]
    # The agent config's JSON Schema is published as is.
    assert doc["components"]["schemas"]["AgentConfig"]["properties"]["tools"]["properties"]["max_tool_rounds"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 5,
    }
    assert client.get("/v1/docs").status_code == 200
