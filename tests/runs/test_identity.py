"""Who the end user is: `end_user_token` lifetimes (issue #13, finding 6). The rest of identity is tested with the
runs it belongs to (tests/runs/test_lifecycle.py)."""

from __future__ import annotations

import time

import jwt
import pytest

from conversations.identity import MAX_TOKEN_LIFETIME_S
from fakes.llm import text
from tests.kagent.test_auth import error

pytestmark = pytest.mark.django_db


def start(h, agent, token):
    return h.tenant.client(h.tenant.publishable_key).post(
        "/v1/runs", {"agent": agent, "input": "x", "end_user_token": token}, format="json"
    )


@pytest.mark.parametrize(
    "exp_in",
    [
        100 * 365 * 24 * 3600,  # a century: a leaked token would be a customer's identity forever
        MAX_TOKEN_LIFETIME_S + 120,
        10**15,
    ],
)
def test_a_token_that_lives_longer_than_a_day_is_refused(h, exp_in):
    agent = h.agent("long-token", [text("ok")])
    secret = h.api.get("/v1/end_user_secret").json()["secret"]
    token = jwt.encode({"sub": "cust-7", "exp": int(time.time()) + exp_in}, secret, "HS256")
    response = start(h, agent, token)
    assert response.status_code == 422 and error(response) == "invalid_end_user_token", response.json()
    assert "24 hours" in response.json()["error"]["message"]


def test_a_token_for_up_to_a_day_is_accepted(h):
    agent = h.agent("day-token", [text("ok")])
    secret = h.api.get("/v1/end_user_secret").json()["secret"]
    token = jwt.encode({"sub": "cust-7", "exp": int(time.time()) + MAX_TOKEN_LIFETIME_S - 60}, secret, "HS256")
    assert start(h, agent, token).status_code == 201


def test_an_exp_written_as_text_is_read_like_pyjwt_reads_it(h):
    agent = h.agent("text-exp", [text("ok")])
    secret = h.api.get("/v1/end_user_secret").json()["secret"]
    far = jwt.encode({"sub": "cust-7", "exp": str(int(time.time()) + 10**9)}, secret, "HS256")
    near = jwt.encode({"sub": "cust-7", "exp": str(int(time.time()) + 600)}, secret, "HS256")
    assert error(start(h, agent, far)) == "invalid_end_user_token"
    assert start(h, agent, near).status_code == 201
