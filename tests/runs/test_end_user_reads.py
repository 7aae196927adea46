"""A publishable key and a verified end user's session or run: reads, answers and cancels need that user's
`end_user_token` (the `X-End-User-Token` header or `end_user_token`): without it, or with another user's, it is a
404 and nothing is learned (issue #12)."""

from __future__ import annotations

import time

import jwt
import pytest

from fakes.llm import calls, text
from tests.kagent.test_auth import error

pytestmark = pytest.mark.django_db
CART = {"name": "get_cart", "description": "The cart.", "effect": "read"}


def token(h, sub: str) -> str:
    secret = h.api.get("/v1/end_user_secret").json()["secret"]
    return jwt.encode({"sub": sub, "exp": int(time.time()) + 300}, secret, "HS256")


def test_a_verified_users_session_and_runs_need_their_token(h):
    agent = h.agent("mine", [calls(("get_cart", {})), text("Two items.")], tools={"client": [CART]})
    browser = h.tenant.client(h.tenant.publishable_key)
    mine, theirs = token(h, "cust-7"), token(h, "cust-8")
    session = browser.post("/v1/sessions", {"agent": agent, "end_user_token": mine}, format="json").json()["id"]
    run = browser.post(
        "/v1/runs", {"agent": agent, "session": session, "input": "cart?", "end_user_token": mine}, format="json"
    ).json()
    paused = h.drive(run["id"])
    call_id = paused["required_action"]["tool_calls"][0]["call_id"]

    for headers in ({}, {"HTTP_X_END_USER_TOKEN": theirs}, {"HTTP_X_END_USER_TOKEN": "not-a-token"}):
        assert browser.get(f"/v1/sessions/{session}", **headers).status_code == 404
        assert browser.get(f"/v1/sessions/{session}/messages", **headers).status_code == 404
        assert browser.get(f"/v1/runs/{run['id']}", **headers).status_code == 404
        answer = browser.post(
            f"/v1/runs/{run['id']}/submit_tool_outputs",
            {"tool_outputs": [{"call_id": call_id, "output": {}}]},
            format="json",
            **headers,
        )
        assert answer.status_code == 404 and error(answer) == "not_found"
        assert browser.post(f"/v1/runs/{run['id']}/cancel", **headers).status_code == 404
        listed = browser.get("/v1/runs", **headers).json()["data"]
        assert run["id"] not in [item["id"] for item in listed]
        assert session not in [item["id"] for item in browser.get("/v1/sessions", **headers).json()["data"]]

    with_token = {"HTTP_X_END_USER_TOKEN": mine}
    assert browser.get(f"/v1/sessions/{session}", **with_token).status_code == 200
    assert browser.get(f"/v1/runs/{run['id']}?end_user_token={mine}").status_code == 200
    assert run["id"] in [item["id"] for item in browser.get("/v1/runs", **with_token).json()["data"]]
    answered = browser.post(
        f"/v1/runs/{run['id']}/submit_tool_outputs",
        {"tool_outputs": [{"call_id": call_id, "output": {"items": 2}}], "end_user_token": mine},
        format="json",
    )
    assert answered.status_code == 200, answered.json()
    # the business's server (secret key) reads everything of its project, as before
    assert h.api.get(f"/v1/runs/{run['id']}").status_code == 200


def test_an_anonymous_session_needs_no_token(h):
    agent = h.agent("anon", [text("hi")])
    browser = h.tenant.client(h.tenant.publishable_key)
    session = browser.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    assert browser.get(f"/v1/sessions/{session}").status_code == 200
