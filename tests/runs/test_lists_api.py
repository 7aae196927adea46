"""`GET /v1/runs` and `GET /v1/sessions` with their filters, handoffs closed and reopened, and someone else's
project as a 404 (or an empty list)."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from conversations.models import Session
from fakes.llm import calls, text
from runs.models import Run
from tests.kagent.test_auth import error
from tests.runs.conftest import VERIFIED

pytestmark = pytest.mark.django_db

HANDOFF = ("transfer_to_human", {"reason_type": "complaint", "summary": "Parcel late"})


def ids(response):
    assert response.status_code == 200, response.json()
    return [item["id"] for item in response.json()["data"]]


def test_runs_list_newest_first_with_filters(h):
    first = h.agent("lists-a", [text("hello")])
    second = h.agent("lists-b", [text("hi")])
    a1 = h.run(first, "one", **VERIFIED)
    b1 = h.run(second, "two")
    a2 = h.start(first, "three")  # still queued: nobody drove it
    assert ids(h.api.get("/v1/runs")) == [a2["id"], b1["id"], a1["id"]]
    assert ids(h.api.get(f"/v1/runs?agent={first}")) == [a2["id"], a1["id"]]
    assert ids(h.api.get("/v1/runs?status=completed")) == [b1["id"], a1["id"]]
    assert ids(h.api.get("/v1/runs?status=queued")) == [a2["id"]]
    assert ids(h.api.get("/v1/runs?end_user=cust-42")) == [a1["id"]]
    assert ids(h.api.get("/v1/runs?end_user=nobody")) == []
    assert ids(h.api.get("/v1/runs?limit=1")) == [a2["id"]]
    page = h.api.get("/v1/runs?limit=2").json()
    assert ids(h.api.get(f"/v1/runs?limit=2&cursor={page['next']}")) == [a1["id"]]

    # Time: Unix seconds or an ISO date, the bound itself excluded.
    Run.objects.filter(pk=a1["id"]).update(created_at=timezone.now() - datetime.timedelta(days=3))
    cutoff = int((timezone.now() - datetime.timedelta(days=1)).timestamp())
    assert ids(h.api.get(f"/v1/runs?created_after={cutoff}")) == [a2["id"], b1["id"]]
    assert ids(h.api.get(f"/v1/runs?created_before={cutoff}")) == [a1["id"]]
    yesterday = (timezone.now() - datetime.timedelta(days=1)).date().isoformat()
    assert ids(h.api.get(f"/v1/runs?created_before={yesterday}")) == [a1["id"]]
    rendered = h.api.get(f"/v1/runs?agent={second}").json()["data"][0]
    assert rendered == h.get(b1["id"])  # the same object as its detail


@pytest.mark.parametrize(
    "query",
    [
        "status=finished",
        "created_after=yesterday",
        "created_before=2026-13-01",
        "sandbox=maybe",
        "end_user=" + "x" * 300,
    ],
)
def test_runs_list_refuses_bad_filters(h, query):
    response = h.api.get(f"/v1/runs?{query}")
    assert response.status_code == 422, response.json()
    assert error(response) == "invalid_parameter"


@pytest.mark.parametrize("query", ["limit=0", "limit=101", "cursor=../etc"])
def test_runs_list_refuses_bad_paging_as_every_list_does(h, query):
    response = h.api.get(f"/v1/runs?{query}")
    assert response.status_code == 400
    assert error(response) == "invalid_parameter"


def test_sandbox_filter_tells_test_panel_runs_apart(h):
    agent = h.agent("lists-sandbox", [text("ok")])
    real = h.run(agent, "real")
    h.fake.script("lists-sandbox", [text("ok")])
    test = h.run(agent, "test", sandbox=True)
    assert ids(h.api.get("/v1/runs?sandbox=true")) == [test["id"]]
    assert ids(h.api.get("/v1/runs?sandbox=false")) == [real["id"]]


def test_a_publishable_key_lists_only_one_verified_users_runs_and_sessions(h):
    """Every visitor holds the publishable key: it lists nothing anonymous, and with a token that user's only."""
    import time

    import jwt

    secret = h.api.get("/v1/end_user_secret").json()["secret"]
    token = jwt.encode({"sub": "cust-7", "exp": int(time.time()) + 300}, secret, "HS256")
    agent = h.agent("lists-pk", [text("ok")])
    h.start(agent, "anonymous, from the app", key=h.tenant.publishable_key)
    mine = h.start(agent, "from the app", key=h.tenant.publishable_key, end_user_token=token)
    h.start(agent, "from the server", end_user={"external_id": "cust-7"})
    pk = h.tenant.client(h.tenant.publishable_key)
    assert ids(pk.get("/v1/runs")) == []
    assert ids(pk.get("/v1/runs", HTTP_X_END_USER_TOKEN=token)) == [mine["id"]]
    session = pk.post("/v1/sessions", {"agent": agent, "end_user_token": token}, format="json").json()["id"]
    pk.post("/v1/sessions", {"agent": agent}, format="json")
    h.session(agent)
    assert ids(pk.get("/v1/sessions")) == []
    assert ids(pk.get("/v1/sessions", HTTP_X_END_USER_TOKEN=token)) == [session]
    assert len(ids(h.api.get("/v1/sessions"))) == 3


def test_sessions_list_filters_status_flagged_and_end_user(h):
    agent = h.agent("lists-ses", [calls(HANDOFF), text("The team has it.")])
    handed = h.session(agent, **VERIFIED)
    h.drive(h.start(agent, "late parcel", session=handed)["id"])
    quiet = h.session(agent)
    Session.objects.filter(pk=quiet).update(flagged=True)

    assert ids(h.api.get("/v1/sessions")) == [quiet, handed]
    assert ids(h.api.get("/v1/sessions?status=handed_off")) == [handed]
    assert ids(h.api.get("/v1/sessions?status=open")) == [quiet]
    assert ids(h.api.get("/v1/sessions?status=closed")) == []
    assert ids(h.api.get("/v1/sessions?flagged=true")) == [quiet]
    assert ids(h.api.get("/v1/sessions?flagged=false")) == [handed]
    assert ids(h.api.get("/v1/sessions?end_user=cust-42")) == [handed]
    assert ids(h.api.get(f"/v1/sessions?agent={agent}&status=handed_off")) == [handed]
    listed = {item["id"]: item for item in h.api.get("/v1/sessions").json()["data"]}
    assert listed[handed]["status"] == "handed_off" and listed[quiet]["status"] == "open"
    assert h.api.get(f"/v1/sessions/{handed}").json()["status"] == "handed_off"

    # The handoff closed, the session is open again.
    handoff = h.api.get("/v1/handoffs").json()["data"][0]
    closed = h.api.patch(f"/v1/handoffs/{handoff['id']}", {"status": "closed"}, format="json")
    assert closed.status_code == 200 and closed.json()["status"] == "closed"
    assert h.api.get(f"/v1/handoffs/{handoff['id']}").json()["status"] == "closed"
    assert ids(h.api.get("/v1/sessions?status=handed_off")) == []
    assert h.api.get("/v1/handoffs?status=open").json()["data"] == []
    reopened = h.api.patch(f"/v1/handoffs/{handoff['id']}", {"status": "open"}, format="json")
    assert reopened.json()["status"] == "open"
    assert error(h.api.patch(f"/v1/handoffs/{handoff['id']}", {"status": "gone"}, format="json")) == "invalid_request"
    assert error(h.api.get("/v1/sessions?status=sleeping")) == "invalid_parameter"
    assert error(h.api.get("/v1/sessions?flagged=yes")) == "invalid_parameter"


def test_test_panel_sessions_only_with_include_tests(h, alice):
    from conversations.services import panel_session_create

    agent = h.agent("lists-panel", [text("ok")])
    real = h.session(agent)
    test = panel_session_create(project=alice.project, agent_id=agent).pk
    assert ids(h.api.get("/v1/sessions")) == [real]
    assert ids(h.api.get("/v1/sessions?include_tests=true")) == [test, real]


def test_someone_elses_runs_sessions_and_handoffs(h, bob):
    agent = h.agent("lists-bob", [calls(HANDOFF), text("The team has it.")])
    session = h.session(agent)
    h.drive(h.start(agent, "late", session=session)["id"])
    handoff = h.api.get("/v1/handoffs").json()["data"][0]["id"]
    other = bob.client()
    assert ids(other.get("/v1/runs")) == []
    assert ids(other.get(f"/v1/runs?agent={agent}")) == []
    assert ids(other.get(f"/v1/runs?session={session}")) == []
    assert ids(other.get("/v1/sessions?include_tests=true")) == []
    assert other.get(f"/v1/handoffs/{handoff}").status_code == 404
    assert other.patch(f"/v1/handoffs/{handoff}", {"status": "closed"}, format="json").status_code == 404
    assert h.api.get(f"/v1/handoffs/{handoff}").json()["status"] == "open"


def test_steps_keep_their_order(h):
    agent = h.agent("lists-steps", [calls(HANDOFF), text("The team has it.")])
    run = h.run(agent, "late")
    kinds = [step["kind"] for step in h.steps(run["id"])]
    assert kinds == ["model_call", "tool_call", "model_call"]
