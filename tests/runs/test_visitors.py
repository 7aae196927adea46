"""What one visitor of a business's site (who holds the page's publishable key, as every visitor does) learns of
another visitor's conversations: nothing."""

from __future__ import annotations

import time

import jwt
import pytest

from fakes.llm import calls, text
from runs import engine

pytestmark = pytest.mark.django_db


def ids(response):
    assert response.status_code == 200, response.json()
    return [item["id"] for item in response.json()["data"]]


def test_one_visitor_cannot_list_another_anonymous_visitors_runs_and_sessions(h):
    """The publishable key is public (it sits in the page). Visitor A chats anonymously; visitor B, from another
    address, with nothing but the same key, must not be able to enumerate A's runs, sessions and messages."""
    agent = h.agent("visitors-visitors", [text("Your parcel ships Monday."), text("ok")])
    a = h.tenant.client(h.tenant.publishable_key)
    a.defaults["REMOTE_ADDR"] = "198.51.100.7"
    session = a.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    run = a.post(
        "/v1/runs",
        {"agent": agent, "session": session, "input": "I'm Jane Doe, 1 Main St, card ending 4242"},
        format="json",
    ).json()
    h.drive(run["id"])

    b = h.tenant.client(h.tenant.publishable_key)
    b.defaults["REMOTE_ADDR"] = "203.0.113.9"
    listed_runs = b.get("/v1/runs")
    listed_sessions = b.get("/v1/sessions")
    assert run["id"] not in ids(listed_runs), "visitor B lists visitor A's run: " + listed_runs.content.decode()[:300]
    assert "Jane Doe" not in listed_runs.content.decode()
    assert session not in ids(listed_sessions), "visitor B lists visitor A's session"


def test_store_false_result_is_not_purged_by_another_visitors_list(h):
    """A `store: false` run's content is deleted once its result was returned. Another visitor listing runs with the
    same publishable key must neither read it nor make it disappear before its own visitor reads it."""
    agent = h.agent("visitors-purge", [text("Secret answer for A.")])
    a = h.tenant.client(h.tenant.publishable_key)
    run = a.post("/v1/runs", {"agent": agent, "input": "private question", "store": False}, format="json").json()
    engine.run_execute(run["id"])  # a worker runs it; nobody has read its result yet

    b = h.tenant.client(h.tenant.publishable_key)
    b.defaults["REMOTE_ADDR"] = "203.0.113.9"
    b_list = b.get("/v1/runs").content.decode()
    assert "Secret answer for A." not in b_list, "visitor B read visitor A's store:false answer"
    mine = a.get(f"/v1/runs/{run['id']}").json()
    assert mine["output"] is not None and mine["output"]["text"] == "Secret answer for A.", mine


def _token(h, sub: str) -> str:
    secret = h.api.get("/v1/end_user_secret").json()["secret"]
    return jwt.encode({"sub": sub, "exp": int(time.time()) + 300}, secret, "HS256")


def test_another_verified_users_session_is_a_404_on_run_create_as_on_reads(h):
    """Reads of cust-7's session with cust-8's token are a 404 ("nothing is learned", issue #12). Naming the same
    session in POST /v1/runs must be answered as a session that doesn't exist, not 409 "belongs to another end
    user" (nor 403 end_user_token_required without a token)."""
    agent = h.agent("visitors-oracle", [text("hi")])
    browser = h.tenant.client(h.tenant.publishable_key)
    seven, eight = _token(h, "cust-7"), _token(h, "cust-8")
    session = browser.post("/v1/sessions", {"agent": agent, "end_user_token": seven}, format="json").json()["id"]
    assert browser.get(f"/v1/sessions/{session}", HTTP_X_END_USER_TOKEN=eight).status_code == 404

    nowhere = "ses_" + "0" * 26
    for token in (eight, None):
        extra = {"end_user_token": token} if token else {}
        theirs = browser.post("/v1/runs", {"agent": agent, "session": session, "input": "x", **extra}, format="json")
        none = browser.post("/v1/runs", {"agent": agent, "session": nowhere, "input": "x", **extra}, format="json")
        assert (theirs.status_code, theirs.json()["error"]["code"]) == (
            none.status_code,
            none.json()["error"]["code"],
        ), (token is not None, theirs.json(), none.json())


def test_an_anonymous_visitor_is_not_given_another_visitors_ticket_number(h):
    """Anonymous one-shot runs of a publishable key share the bucket `anon:<key>:<address>` (every customer behind
    one NAT, office or mobile carrier). Visitor A's open ticket must not be handed to visitor B as "your" ticket:
    the refusal's guidance tells B's model to give B A's ticket number."""
    import json

    turn = calls(("create_ticket", {"title": "Late", "description": "Order 1001 for Jane Doe is late"}))
    agent = h.agent(
        "visitors-anon-ticket",
        [turn, text("Ticket TKT-1 is open.")],
        tools={"allow_anonymous_actions": True, "builtin": {"create_ticket": {"enabled": True}}},
    )
    a = h.start(agent, "my order is late", key=h.tenant.publishable_key, allow_actions=True)
    engine.run_execute(a["id"])
    h.fake.script("visitors-anon-ticket", [turn, text("ok")])
    b = h.start(agent, "my refund never came", key=h.tenant.publishable_key, allow_actions=True)
    engine.run_execute(b["id"])
    shown = [
        json.dumps(c["shown_to_model"]) for c in (s["tool_call"] for s in h.steps(b["id"]) if s["kind"] == "tool_call")
    ]
    assert not any("TKT-1" in item for item in shown), shown
