"""Issue 39, finding 4 (what this part bounds): one running check run per agent and three per project (409
`check_run_in_progress` naming the running one), and a turn budget per check run (the checks past it fail with
`check_budget_exhausted`, without a run). Through the API."""

from __future__ import annotations

from typing import Any

import pytest

from checks import services as checks
from checks.models import CheckRun
from runs.models import Run
from tests.checks.test_checks import add_check, support_agent
from tests.runs.conftest import Harness

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def one_at_a_time(settings: Any) -> None:
    settings.KAGENT_CHECK_CONCURRENCY = 1


def start(h: Harness, agent: str) -> Any:
    return h.api.post(f"/v1/agents/{agent}/checks/run", {}, format="json")


def test_a_second_check_run_of_an_agent_is_refused_while_the_first_runs_and_allowed_after(h: Harness):
    agent = support_agent(h)
    add_check(h, agent)
    first = start(h, agent)
    assert first.status_code == 201

    again = start(h, agent)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "check_run_in_progress"
    assert again.json()["error"]["details"] == {"check_run": first.json()["id"]}
    publish = h.api.post(f"/v1/agents/{agent}/publish", {}, format="json")
    assert publish.status_code == 409 and publish.json()["error"]["code"] == "check_run_in_progress"
    assert CheckRun.objects.filter(agent_id=agent).count() == 1  # nothing half-made by the refusals

    checks.check_run_execute(first.json()["id"])  # it finishes
    assert start(h, agent).status_code == 201


def test_a_project_runs_at_most_three_check_runs_at_once(h: Harness):
    agents = [support_agent(h, f"checks-{n}") for n in range(4)]
    for agent in agents:
        add_check(h, agent)
    assert [start(h, agent).status_code for agent in agents[:3]] == [201, 201, 201]

    fourth = start(h, agents[3])
    assert fourth.status_code == 409 and fourth.json()["error"]["code"] == "check_run_in_progress"
    assert "3 check runs of this project are running" in fourth.json()["error"]["message"]


def test_checks_past_the_turn_budget_fail_without_a_run(h: Harness, monkeypatch: Any):
    monkeypatch.setattr(checks, "TURN_BUDGET", 3)
    agent = support_agent(h)
    add_check(h, agent, name="two turns", input=["hello", "my parcel arrived broken, I want a refund"])
    add_check(h, agent, name="two more")  # one turn: the budget's third
    add_check(h, agent, name="past it", input=["a", "b"])
    started = start(h, agent).json()
    checks.check_run_execute(started["id"])

    results = {r["name"]: r for r in h.api.get(f"/v1/agents/{agent}/check_runs/{started['id']}").json()["results"]}
    assert results["past it"]["passed"] is False and results["past it"]["run"] is None
    assert results["past it"]["problems"][0].startswith("check_budget_exhausted")
    assert results["two more"]["run"] is not None
    assert Run.objects.filter(sandbox=True).count() == 3  # the budget's three turns, no more
