"""Hostile bodies, ids and query strings get a 4xx with a stable code, never a 500, and change nothing."""

from __future__ import annotations

import pytest

from conversations.models import Session
from desk.models import Handoff
from fakes.llm import calls, text
from runs.models import Run
from tests.kagent.test_auth import error
from tests.runs.test_policy_refusals import refusals

pytestmark = pytest.mark.django_db

CART = {
    "name": "get_cart",
    "description": "The cart.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    "effect": "read",
}


def post_raw(client, path, raw: str):
    return client.generic("POST", path, raw.encode("utf-8", "surrogatepass"), content_type="application/json")


@pytest.fixture
def agent(h):
    return h.agent("hostile", [text("ok")] * 5)


BAD_RUN_BODIES = [
    ('{"agent": "AGENT", "input": "hi\\u0000there"}', 400, "invalid_json"),
    ('{"agent": "AGENT", "input": "hi\\ud800"}', 400, "invalid_json"),
    ('{"agent": "agt_\\u0000", "input": "hi"}', 400, "invalid_json"),
    ('{"agent": "AGENT", "input": "hi", "session": "ses_\\u0000"}', 400, "invalid_json"),
    ('{"agent": "AGENT", "input": "hi", "metadata": {"k\\u0000": "v"}}', 400, "invalid_json"),
    ('{"agent": "AGENT", "input": "hi", "metadata": {"k": "\\udc00"}}', 400, "invalid_json"),
    (
        '{"agent": "AGENT", "input": "hi", "end_user": {"external_id": "u", "traits": {"a": 1e400}}}',
        400,
        "invalid_json",
    ),
    ('{"agent": "AGENT", "input": "hi", "end_user": {"external_id": "u", "traits": {"a": NaN}}}', 400, "invalid_json"),
    ('{"agent": "AGENT", "input": "hi", "metadata": ' + "[" * 50000 + "]" * 50000 + "}", 400, "invalid_json"),
    ('{"agent": "AGENT", "input": "hi", "metadata": ' + "[" * 40 + "]" * 40 + "}", 400, "invalid_json"),
    ('{"agent": "AGENT", "input": "hi", "version": 100000000000000000000}', 404, "not_found"),
    ('{"agent": "AGENT", "input": "hi", "wait": "5"}', 422, "invalid_request"),
    ('{"agent": "AGENT", "input": "hi", "end_user_token": "a.b.c"}', 422, "invalid_end_user_token"),
    ('{"agent": ["AGENT"], "input": "hi"}', 422, "invalid_request"),
    ('{"agent": "AGENT", "input": {"text": "hi"}}', 422, "invalid_request"),
    ("[1, 2]", 400, "invalid_request"),
    ("null", 400, "invalid_request"),
    ('{"agent": "AGENT", "input": "hi"', 400, "invalid_json"),
    (b"\xff\xfe{}".decode("latin-1"), 400, "invalid_json"),
]


@pytest.mark.parametrize(("raw", "status", "code"), BAD_RUN_BODIES)
def test_hostile_run_bodies(h, agent, raw, status, code):
    response = post_raw(h.api, "/v1/runs", raw.replace("AGENT", agent))
    assert response.status_code == status, response.content[:300]
    assert error(response) == code
    assert Run.objects.count() == 0


@pytest.mark.parametrize(
    "raw",
    [
        '{"agent": "agt_\\u0000"}',
        '{"agent": "AGENT", "metadata": {"k": "\\u0000"}}',
        '{"agent": "AGENT", "end_user": {"external_id": "u3", "traits": {"k": "\\ud800"}}}',
    ],
)
def test_hostile_session_bodies(h, agent, raw):
    response = post_raw(h.api, "/v1/sessions", raw.replace("AGENT", agent))
    assert response.status_code == 400 and error(response) == "invalid_json"
    assert Session.objects.count() == 0


def test_hostile_ids_and_query_strings(h, agent):
    for path in (
        "/v1/runs/run_%00",
        "/v1/runs/run_x%0a",
        "/v1/agents/agt_%00/versions",
        "/v1/tools/ord%00er",
        "/v1/secrets/TOKEN%00",
    ):
        response = h.api.get(path)
        assert response.status_code == 404, path
        assert error(response) == "not_found"
    session = h.session(agent)
    for query in ("cursor=%00", "cursor=run_' OR 1=1 --", "limit=99999999999999999999"):
        response = h.api.get(f"/v1/sessions/{session}/messages?{query}")
        assert response.status_code == 400 and error(response) == "invalid_parameter", query


def test_too_large_body_is_413(h, agent, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = post_raw(h.api, "/v1/runs", f'{{"agent": "{agent}", "input": "{"x" * 5000}"}}')
    assert response.status_code == 413 and error(response) == "request_too_large"


def test_hostile_tool_outputs(h):
    agent = h.agent("hsubmit", [calls(("get_cart", {})), text("ok")], tools={"client": [CART]})
    session = h.session(agent)
    run = h.run(agent, "cart?", session=session)
    call_id = run["required_action"]["tool_calls"][0]["call_id"]
    cases = [
        ('{"tool_outputs": [{"call_id": ["x"], "output": 1}]}', 422),
        ('{"tool_outputs": [{"call_id": {"a": 1}, "output": 1}]}', 422),
        ('{"tool_outputs": [{"call_id": "CALL", "output": "\\ud800"}]}', 400),
        ('{"tool_outputs": [{"call_id": "CALL", "output": {"k\\u0000": "a"}}]}', 400),
        ('{"tool_outputs": [{"call_id": "CALL", "output": ' + "[" * 900 + "]" * 900 + "}]}", 400),
    ]
    for raw, status in cases:
        response = post_raw(h.api, f"/v1/runs/{run['id']}/submit_tool_outputs", raw.replace("CALL", call_id))
        assert response.status_code == status, (raw[:80], response.content[:200])
    assert h.get(run["id"])["status"] == "requires_action"
    ok = post_raw(
        h.api,
        f"/v1/runs/{run['id']}/submit_tool_outputs",
        f'{{"tool_outputs": [{{"call_id": "{call_id}", "output": 1, "is_error": null}}]}}',
    )
    assert ok.status_code == 200


def test_sandbox_as_an_object(h):
    agent = h.agent("sandbox-obj", [text("ok")], publish=False)
    response = h.api.post(
        "/v1/runs", {"agent": agent, "input": "hi", "sandbox": {"run_real_actions": True}}, format="json"
    )
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert run.sandbox and run.run_real_actions
    bad = h.api.post("/v1/runs", {"agent": agent, "input": "hi", "sandbox": {"real": True}}, format="json")
    assert bad.status_code == 422


def test_deeply_nested_arguments_are_invalid_arguments_not_an_internal_error(h):
    # JSON nested deeper than the parser's recursion limit: the model hears invalid_arguments, the run goes on.
    nested = "[" * 100_000 + "]" * 100_000
    agent = h.agent("deep-args", [calls(("transfer_to_human", nested)), text("Sorry, that didn't work.")])
    run = h.run(agent)
    assert run["status"] == "completed", run.get("last_error")
    assert refusals(h, run["id"]) == [("transfer_to_human", "invalid_arguments")]


def test_deep_but_parseable_arguments_do_not_break_the_run(h):
    nested = '{"summary": "x", "reason_type": "complaint", "extra": ' + "[" * 5_000 + "]" * 5_000 + "}"
    agent = h.agent("deep-args-2", [calls(("transfer_to_human", nested)), text("Sorry, that didn't work.")])
    run = h.run(agent)
    assert run["status"] == "completed", run.get("last_error")
    assert refusals(h, run["id"]) == [("transfer_to_human", "invalid_arguments")]


def test_duplicate_handoff_is_not_fooled_by_whitespace(h):
    # Step 5, the same tool with the same arguments: a doubled or trailing space makes no second handoff (and no
    # second handoff.created webhook) in the same reply.
    agent = h.agent(
        "dup-whitespace",
        [
            calls(("transfer_to_human", {"reason_type": "complaint", "summary": "Late order"})),
            calls(("transfer_to_human", {"reason_type": "complaint", "summary": " Late  order "})),
            text("The team has it."),
        ],
    )
    run = h.run(agent)
    assert run["status"] == "completed", run
    assert Handoff.objects.count() == 1, refusals(h, run["id"])
