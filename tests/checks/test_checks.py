"""An agent's checks (SPEC §4 "Checks and traffic", issue 30): saved test conversations, run in the sandbox against
the draft or a published version (actions simulated, client tools answered from the check, approvals counted as
given), gating a publish (409 checks_failed, or `force` with a note, recorded on the version), made from a run."""

from __future__ import annotations

from typing import Any

import pytest

from checks import services as checks
from checks.models import Check, CheckRun
from desk.models import Ticket
from fakes.llm import calls, text
from runs.models import Run
from tests.runs.conftest import VERIFIED, Harness

TICKET = {"title": "Refund", "description": "Broken parcel."}
TOOLS = {
    "builtin": {"create_ticket": {"enabled": True, "approval": "ask"}},
    "client": [{"name": "get_cart", "description": "The cart.", "effect": "read"}],
}


@pytest.fixture(autouse=True)
def one_at_a_time(settings: Any) -> None:
    # These tests' data lives in their own transaction: checks run here, in this thread (a test of its own runs them
    # concurrently, in threads, on committed data).
    settings.KAGENT_CHECK_CONCURRENCY = 1


def support_agent(h: Harness, script: str = "checks", publish: bool = False) -> str:
    h.fake.script(
        script,
        [calls(("get_cart", {}), ("create_ticket", TICKET)), text("Your refund request is in: the team follows up.")],
    )
    return h.agent(script, tools=TOOLS, publish=publish)


def add_check(h: Harness, agent: str, **fields: Any) -> dict[str, Any]:
    body = {
        "name": "Refund request",
        "input": "My parcel arrived broken, I want a refund",
        "end_user": {"external_id": "cust-42"},
        "client_outputs": {"get_cart": {"items": 2}},
        "expect": {"tools_called": ["create_ticket", "get_cart"], "output_contains": ["team follows up"]},
        **fields,
    }
    response = h.api.post(f"/v1/agents/{agent}/checks", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def run_checks(h: Harness, agent: str, **body: Any) -> dict[str, Any]:
    started = h.api.post(f"/v1/agents/{agent}/checks/run", body, format="json")
    assert started.status_code == 201, started.json()
    assert started.json()["status"] == "running"
    checks.check_run_execute(started.json()["id"])  # what the worker does with the queued check run
    return h.api.get(f"/v1/agents/{agent}/check_runs/{started.json()['id']}").json()


@pytest.mark.django_db
def test_checks_pass_in_the_sandbox_with_client_tools_answered_and_actions_simulated(h: Harness):
    agent = support_agent(h)
    check = add_check(h, agent)
    assert check["object"] == "check" and check["expect"]["tools_called"] == ["create_ticket", "get_cart"]
    assert [c["id"] for c in h.api.get(f"/v1/agents/{agent}/checks").json()["data"]] == [check["id"]]
    result = run_checks(h, agent)
    assert result["status"] == "passed", result
    [outcome] = result["results"]
    assert outcome["check"] == check["id"] and outcome["passed"] and outcome["problems"] == []
    run = Run.objects.get(pk=outcome["run"])
    assert run.sandbox and run.version_number is None  # the draft
    calls_made = {c["name"]: c for c in h.tool_steps(run.pk)}
    assert calls_made["create_ticket"]["simulated"] is True  # counted as approved, then simulated
    assert calls_made["get_cart"]["shown_to_model"]["data"]["output"] == '{"items":2}'
    assert not Ticket.objects.exists()  # nothing reached the desk


@pytest.mark.django_db
def test_a_failing_check_names_what_went_wrong_and_blocks_a_publish_unless_forced(h: Harness):
    agent = support_agent(h, "gate")
    add_check(h, agent, name="Says sorry", expect={"output_contains": ["sorry"], "tools_not_called": ["get_cart"]})
    result = run_checks(h, agent)
    assert result["status"] == "failed"
    [outcome] = result["results"]
    assert outcome["problems"] == ["get_cart was called", "the answer doesn't say 'sorry'"]

    h.fake.script("gate", [calls(("get_cart", {})), text("Here is your cart.")] * 3)
    refused = h.api.post(f"/v1/agents/{agent}/publish", {}, format="json")
    assert refused.status_code == 409, refused.json()
    error = refused.json()["error"]
    assert error["code"] == "checks_failed" and "Says sorry" in error["message"]
    assert error["details"]["failures"][0]["problems"]
    assert h.api.get(f"/v1/agents/{agent}/versions").json()["data"] == []  # nothing published

    no_note = h.api.post(f"/v1/agents/{agent}/publish", {"force": True}, format="json")
    assert no_note.status_code == 422
    forced = h.api.post(
        f"/v1/agents/{agent}/publish", {"force": True, "note": "Known issue, fix tomorrow."}, format="json"
    )
    assert forced.status_code == 201, forced.json()
    assert forced.json()["forced"] is True and forced.json()["check_failures"][0]["name"] == "Says sorry"


@pytest.mark.django_db
def test_publish_passes_when_checks_pass_and_without_checks(h: Harness):
    agent = support_agent(h, "pass")
    published = h.api.post(f"/v1/agents/{agent}/publish", {}, format="json")
    assert published.status_code == 201 and published.json()["forced"] is False  # no checks: as before
    add_check(h, agent)
    again = h.api.post(f"/v1/agents/{agent}/publish", {"note": "v2"}, format="json")
    assert again.status_code == 201, again.json()
    assert again.json()["number"] == 2 and again.json()["check_failures"] == []
    assert CheckRun.objects.filter(agent_id=agent, status="passed").count() == 1


@pytest.mark.django_db
def test_a_check_of_several_turns_runs_them_in_one_conversation_against_a_version(h: Harness):
    agent = h.agent(
        "turns",
        [text("Hello! How can I help?"), text("Our returns window is 30 days.")],
        instructions="Version one. Returns are accepted within 30 days.",
    )
    add_check(
        h,
        agent,
        name="Returns",
        input=["hi", "how long do I have to return?"],
        client_outputs={},
        expect={"output_contains": ["30 days"]},
    )
    result = run_checks(h, agent, version=1)
    assert result["status"] == "passed", result
    last = Run.objects.get(pk=result["results"][0]["run"])
    assert last.version_number == 1 and last.input == "how long do I have to return?"
    assert Run.objects.filter(session_id=last.session_id).count() == 2
    assert h.api.post(f"/v1/agents/{agent}/checks/run", {"version": 9}, format="json").status_code == 404


@pytest.mark.django_db
def test_a_check_made_from_a_run_expects_the_tools_it_called(h: Harness):
    h.fake.script("from", [calls(("create_ticket", TICKET)), text("Your refund request is in.")])
    agent = h.agent("from", tools={"builtin": {"create_ticket": {"enabled": True}}}, publish=False)
    session = h.session(agent, **VERIFIED)
    panel = h.run(agent, "refund my broken parcel", session=session, sandbox={"run_real_actions": False})
    response = h.api.post(
        f"/v1/agents/{agent}/checks", {"from_run": panel["id"], "name": "From the panel"}, format="json"
    )
    assert response.status_code == 201, response.json()
    made = response.json()
    assert made["name"] == "From the panel" and made["input"] == "refund my broken parcel"
    assert made["expect"] == {"tools_called": ["create_ticket"]} and made["end_user"]["external_id"] == "cust-42"
    other = h.agent("other", [text("hi")])
    assert h.api.post(f"/v1/agents/{other}/checks", {"from_run": panel["id"]}, format="json").status_code == 404


@pytest.mark.django_db
def test_checks_are_written_checked_and_limited(h: Harness):
    agent = h.agent("crud", [text("hi")])
    missing = h.api.post(f"/v1/agents/{agent}/checks", {"name": "No input"}, format="json")
    assert missing.status_code == 422
    bad_expect = h.api.post(
        f"/v1/agents/{agent}/checks", {"name": "x", "input": "hi", "expect": {"maybe": True}}, format="json"
    )
    assert bad_expect.status_code == 422
    check = add_check(h, agent)
    patched = h.api.patch(f"/v1/agents/{agent}/checks/{check['id']}", {"name": "Renamed"}, format="json").json()
    assert patched["name"] == "Renamed" and patched["input"] == check["input"]
    Check.objects.bulk_create(
        [Check(project_id=h.tenant.project.pk, agent_id=agent, name=f"c{n}", input="hi") for n in range(49)]
    )
    too_many = h.api.post(f"/v1/agents/{agent}/checks", {"name": "51st", "input": "hi"}, format="json")
    assert too_many.status_code == 422 and too_many.json()["error"]["code"] == "too_many_checks"
    assert h.api.delete(f"/v1/agents/{agent}/checks/{check['id']}").status_code == 200
    assert h.api.get(f"/v1/agents/{agent}/checks/{check['id']}").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_checks_run_concurrently_each_in_its_own_conversation(alice, fake_llm, settings):
    settings.KAGENT_CHECK_CONCURRENCY = 4
    h = Harness(alice, fake_llm)
    agent = support_agent(h, "many")
    for n in range(4):
        add_check(h, agent, name=f"Refund {n}")
    result = run_checks(h, agent)
    assert result["status"] == "passed", result
    sessions = {Run.objects.get(pk=r["run"]).session_id for r in result["results"]}
    assert len(sessions) == 4


@pytest.mark.django_db
def test_a_check_never_rewrites_a_real_customers_traits_and_counts_against_its_own_bucket(h: Harness):
    agent = support_agent(h, "traits", publish=True)
    h.fake.script("traits", [text("Hello.")] * 10)
    h.run(agent, "hi", **VERIFIED)  # the real customer cust-42, tier gold
    add_check(h, agent, name="As cust-42", expect={}, end_user={"external_id": "cust-42", "traits": {"tier": "x"}})
    result = run_checks(h, agent)
    assert result["status"] == "passed", result
    from conversations.models import EndUser

    assert EndUser.objects.get(project=h.tenant.project, external_id="cust-42").traits == {"tier": "gold"}
    check_run = Run.objects.get(pk=result["results"][0]["run"])
    assert check_run.rate_key == f"check:{result['id']}"


@pytest.mark.django_db
def test_a_draft_changed_while_its_checks_ran_is_not_published(h: Harness, monkeypatch):
    agent = support_agent(h, "race")
    add_check(h, agent, expect={})
    h.fake.script("race", [text("Hello.")] * 10)
    original = checks.check_run_execute

    def meanwhile(check_run_id: str):
        ran = original(check_run_id)
        # Someone saves the draft while the checks run.
        assert (
            h.api.patch(f"/v1/agents/{agent}", {"config": {"instructions": "Unchecked."}}, format="json").status_code
            == 200
        )
        return ran

    monkeypatch.setattr(checks, "check_run_execute", meanwhile)
    response = h.api.post(f"/v1/agents/{agent}/publish", {}, format="json")
    assert response.status_code == 409 and response.json()["error"]["code"] == "draft_changed"
    assert h.api.get(f"/v1/agents/{agent}/versions").json()["data"] == []


@pytest.mark.django_db
def test_a_check_run_is_never_left_running(h: Harness, monkeypatch):
    agent = support_agent(h, "broken")
    add_check(h, agent)

    def broken(check_run: Any, check: Any) -> Any:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(checks, "_result_of", broken)
    result = run_checks(h, agent)
    assert result["status"] == "failed" and result["results"][0]["problems"] == ["it did not finish"]
    # One a dead process left running: ended by the sweep.
    stale = CheckRun.objects.create(project_id=h.tenant.project.pk, agent_id=agent, status="running")
    CheckRun.objects.filter(pk=stale.pk).update(created_at=stale.created_at - checks.CHECK_RUN_STALE)
    assert checks.check_runs_expire() == 1
    assert CheckRun.objects.get(pk=stale.pk).status == "failed"
