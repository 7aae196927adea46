"""What the fault scenarios (bench/faults.py) found, each kept as a plain test; the faults are injected (the only
mocks here), the rest is the real code path."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisDown

from kagent import broker, streams, throttle
from runs import streams as run_streams
from runs.models import Run

pytestmark = pytest.mark.django_db


def test_a_run_whose_message_cannot_reach_the_broker_is_answered_as_created(alice, monkeypatch):
    """Redis restarting while a run is created: the row is committed, so the request answers 201 with it (a 500
    made the app start it again); the sweeper sends its message once it waited KAGENT_RUN_RESEND_SECONDS."""
    api = alice.client()
    agent = api.post("/v1/agents", {"name": "a"}, format="json").json()["id"]
    assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201

    def broker_down(name, *args, **options):
        raise BrokerError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")

    monkeypatch.setattr(broker, "send", broker_down)
    response = api.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json")
    assert response.status_code == 201, response.content
    assert Run.objects.get(pk=response.json()["id"]).status == "queued"


@pytest.mark.parametrize("outage", [OperationalError("the database system is shutting down"), RedisDown("refused")])
@pytest.mark.parametrize("path", ["/v1/agents", "/v1/runs"])
def test_an_outage_is_a_503_to_try_again_in_the_error_json(alice, monkeypatch, outage, path):
    def down(key, *, address):
        raise outage

    monkeypatch.setattr(throttle, "api_request", down)
    api = alice.client()
    response = api.post(path, {"name": "a", "agent": "agt_x", "input": "hi"}, format="json")
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert response.json()["error"]["code"] == "service_unavailable"
    assert set(response.json()["error"]) == {"code", "message", "details"}


def test_the_document_says_every_operation_can_answer_503_with_retry_after(api):
    # A client generated from the document learns that a 503 is to be tried again, and where the wait is.
    document = api.get("/v1/openapi.json").json()
    operations = [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]
    assert operations
    for path, method, operation in operations:
        unavailable = operation["responses"].get("503")
        assert unavailable is not None, f"{method} {path}"
        assert "Retry-After" in unavailable["headers"]
        assert unavailable["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}


@pytest.mark.parametrize("failing", ["slot", "database"])
def test_a_wait_that_loses_redis_or_the_database_answers_the_run_as_created(alice, monkeypatch, failing):
    """The review's finding: the run is committed before the wait starts, so an outage while waiting must not answer
    503 (an app, or a client that resends on 503, would create the run again)."""
    api = alice.client()
    agent = api.post("/v1/agents", {"name": "a"}, format="json").json()["id"]
    assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201

    def down(*args, **kwargs):
        raise RedisDown("refused") if failing == "slot" else OperationalError("the database system is shutting down")

    if failing == "slot":
        monkeypatch.setattr(streams.KeySlot, "try_take", down)
    else:
        monkeypatch.setattr(run_streams, "_settled", down)
    response = api.post("/v1/runs", {"agent": agent, "input": "hi", "wait": 2}, format="json")
    assert response.status_code == 201, response.content
    assert response["Retry-After"] == "1"
    assert response.json()["status"] == "queued"
    assert Run.objects.filter(project=alice.project).count() == 1
