"""`Idempotency-Key` on `POST /v1/runs`: an app whose answer was lost (a connection reset after the run was committed)
sends the request again with the same key and gets the run it started, not a second one."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.db import connection

from conversations.models import Session
from fakes.llm import text
from kagent.models import ApiKey
from kagent.services import api_key_create
from runs.models import Run, RunEvent
from tests.conftest import make_tenant


def create(client: Any, body: dict[str, Any], key: str | None) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post("/v1/runs", body, format="json", **headers)


def test_the_same_key_again_answers_with_the_run_it_started(h):
    agent = h.agent("idem-once", [text("Hello once."), text("never asked")])
    body = {"agent": agent, "input": "hi"}
    key = str(uuid.uuid4())
    first = create(h.api, body, key)
    assert first.status_code == 201 and "Idempotent-Replayed" not in first
    again = create(h.api, body, key)
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert Run.objects.filter(agent_id=agent).count() == 1
    done = h.drive(first.json()["id"])
    assert done["output"]["text"] == "Hello once."
    # After it ran, the same request still answers with it, as it is now; `wait` only changes how it is answered.
    later = create(h.api, {**body, "wait": 1}, key)
    assert later.status_code == 200 and later.json()["status"] == "completed"
    assert later.json()["output"]["text"] == "Hello once." and later["Idempotent-Replayed"] == "true"
    assert len(h.fake.requests("idem-once")) == 1  # the model was asked once
    # Without a key, each request is a run of its own (as before).
    assert create(h.api, body, None).json()["id"] != first.json()["id"]


def test_the_same_key_with_another_request_is_refused_and_starts_nothing(h):
    agent = h.agent("idem-other", [text("x")])
    key = "order-8812-message-1"
    assert create(h.api, {"agent": agent, "input": "hi"}, key).status_code == 201
    refused = create(h.api, {"agent": agent, "input": "something else"}, key)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "idempotency_key_reused"
    assert Run.objects.filter(agent_id=agent).count() == 1


def test_keys_belong_to_their_api_key(h):
    agent = h.agent("idem-keys", [text("x")])
    _, other_secret = api_key_create(project=h.tenant.project, kind=ApiKey.Kind.SECRET, name="other server")
    body = {"agent": agent, "input": "hi"}
    mine = create(h.api, body, "same-key").json()["id"]
    theirs = create(h.tenant.client(other_secret), body, "same-key").json()["id"]
    assert mine != theirs


@pytest.mark.parametrize("bad", ["", "x" * 256, "caf\u00e9", "tab\there"])
def test_a_key_that_is_not_a_key_is_refused(h, bad):
    agent = h.agent("idem-bad", [text("x")])
    refused = create(h.api, {"agent": agent, "input": "hi"}, bad)
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_parameter"
    assert not Run.objects.filter(agent_id=agent).exists()


def test_a_publishable_key_cannot_use_one(h):
    agent = h.agent("idem-pk", [text("x")])
    browser = h.tenant.client(h.tenant.publishable_key)
    refused = create(browser, {"agent": agent, "input": "hi"}, str(uuid.uuid4()))
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_request"
    assert not Run.objects.filter(agent_id=agent).exists()


def test_a_session_run_sent_again_does_not_supersede_itself(h):
    agent = h.agent("idem-session", [text("x")])
    session = h.session(agent)
    body = {"agent": agent, "input": "where is my parcel?", "session": session}
    first = create(h.api, body, "msg-1").json()
    again = create(h.api, body, "msg-1")
    assert again.status_code == 201 and again.json()["id"] == first["id"]
    assert h.get(first["id"])["status"] == "queued"  # not cancelled as superseded by its own copy
    assert Session.objects.get(pk=session).messages.filter(role="user").count() == 1
    assert RunEvent.objects.filter(run_id=first["id"], type="run.cancelled").count() == 0


@pytest.mark.django_db(transaction=True)
def test_requests_racing_with_one_key_start_one_run(fake_llm):
    tenant = make_tenant("racer")
    fake_llm.script("idem-race", [text("x")])
    api = tenant.client()
    config = {"model": {"provider": "openai_compatible", "name": "script:idem-race"}}
    agent = api.post("/v1/agents", {"name": "race", "config": config}, format="json").json()["id"]
    assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
    session = api.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    answers: list[tuple[int, str]] = []
    gate = threading.Barrier(6)

    def send(body: dict[str, Any]) -> None:
        try:
            gate.wait()
            response = create(tenant.client(), body, "the-same-key" + body.get("session", ""))
            answers.append((response.status_code, response.json()["id"]))
        finally:
            connection.close()  # this thread's own

    for body in ({"agent": agent, "input": "hi"}, {"agent": agent, "input": "hi", "session": session}):
        answers.clear()
        gate.reset()
        threads = [threading.Thread(target=send, args=(body,)) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(answers) == 6 and {status for status, _ in answers} == {201}
        assert len({run_id for _, run_id in answers}) == 1
    assert Run.objects.filter(agent_id=agent).count() == 2
    assert Run.objects.filter(agent_id=agent, status="cancelled").count() == 0
