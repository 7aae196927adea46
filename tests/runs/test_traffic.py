"""A share of traffic for a new version, figures per version, rollback (SPEC §4 "Checks and traffic", issue 30): a
50/50 split sticky per conversation and per end user, the run recording its version, a new publish not joining a
split by itself, each version's figures, and a rollback taking effect for the next run."""

from __future__ import annotations

import pytest

from agents.selectors import traffic_version
from fakes.llm import Fault, calls, text
from tests.runs.conftest import Harness

pytestmark = pytest.mark.django_db


def two_versions(h: Harness, script: str = "split") -> str:
    """An agent with versions 1 and 2 published (different instructions)."""
    agent = h.agent(script, [text("Hello from the agent.")] * 200, instructions="Version one.")
    assert (
        h.api.patch(f"/v1/agents/{agent}", {"config": {"instructions": "Version two."}}, format="json").status_code
        == 200
    )
    assert h.api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
    return agent


def split(h: Harness, agent: str, traffic):
    return h.api.patch(f"/v1/agents/{agent}", {"traffic": traffic}, format="json")


def test_a_split_is_sticky_per_conversation_and_the_run_records_its_version(h: Harness):
    agent = two_versions(h)
    response = split(h, agent, [{"version": 1, "weight": 50}, {"version": 2, "weight": 50}])
    assert response.status_code == 200, response.json()
    assert response.json()["traffic"] == [{"version": 1, "weight": 50}, {"version": 2, "weight": 50}]
    seen = set()
    for n in range(24):
        session = h.session(agent)
        versions = {h.start(agent, f"hi {turn}", session=session)["version"] for turn in range(3)}
        assert len(versions) == 1, f"conversation {n} moved between versions: {versions}"
        seen |= versions
    assert seen == {1, 2}  # both halves got conversations (all 24 on one side: 2^-23)
    # An end user's one-shot runs are sticky too.
    for customer in ("cust-1", "cust-2", "cust-3"):
        versions = {h.start(agent, "hi", end_user={"external_id": customer})["version"] for _ in range(3)}
        assert len(versions) == 1
    # The model of each run was given its own version's instructions.
    run = h.start(agent, "which?", session=h.session(agent))
    done = h.drive(run["id"])
    system = h.fake.requests("split")[-1].system
    assert f"Version {'one' if done['version'] == 1 else 'two'}." in system


def test_a_new_publish_does_not_join_a_split_and_rollback_takes_effect_at_once(h: Harness):
    agent = two_versions(h, "rollback")
    assert split(h, agent, [{"version": 2, "weight": 100}]).status_code == 200
    assert h.api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201  # version 3
    assert {h.start(agent, "hi")["version"] for _ in range(5)} == {2}
    rolled = h.api.post(f"/v1/agents/{agent}/rollback", {"version": 1}, format="json")
    assert rolled.status_code == 200 and rolled.json()["traffic"] == [{"version": 1, "weight": 100}]
    assert h.start(agent, "hi", session=h.session(agent))["version"] == 1
    # A pin still wins (secret key); clearing the split goes back to the latest.
    assert h.start(agent, "hi", version=2)["version"] == 2
    assert split(h, agent, None).json()["traffic"] is None
    assert h.start(agent, "hi")["version"] == 3


@pytest.mark.parametrize(
    ("traffic", "path"),
    [
        ([{"version": 1, "weight": 50}, {"version": 9, "weight": 50}], "$.traffic[1].version"),
        ([{"version": 1, "weight": 50}, {"version": 2, "weight": 40}], "$.traffic"),
        ([{"version": 1, "weight": 50}, {"version": 1, "weight": 50}], "$.traffic[1].version"),
        ([], "$.traffic"),
        ([{"version": 1, "weight": 50.5}, {"version": 2, "weight": 49.5}], None),
        ([{"version": 1}], None),
    ],
    ids=["unpublished", "sum", "twice", "empty", "fractional", "no-weight"],
)
def test_a_split_that_cant_be_is_refused_and_nothing_changes(h: Harness, traffic, path):
    agent = two_versions(h, "bad")
    response = split(h, agent, traffic)
    assert response.status_code == 422, response.json()
    assert response.json()["error"]["code"] == "invalid_traffic"
    if path:
        assert response.json()["error"]["details"][0]["path"] == path
    assert h.api.get(f"/v1/agents/{agent}").json()["traffic"] is None
    rollback = h.api.post(f"/v1/agents/{agent}/rollback", {"version": 7}, format="json")
    assert rollback.status_code == 422 and rollback.json()["error"]["code"] == "invalid_traffic"


def test_each_version_has_its_figures(h: Harness):
    agent = h.agent(
        "figures",
        [
            calls(("transfer_to_human", {"reason_type": "complaint", "summary": "Wants a person."})),
            text("I've passed you to the team."),
        ],
    )
    session = h.session(agent, end_user={"external_id": "cust-9"})
    assert h.run(agent, "a person please", session=session)["status"] == "completed"
    h.fake.script("figures", [text("The broken answer.", faults=[Fault(status=500)] * 5)])
    failed = h.run(agent, "hello")
    assert failed["status"] == "failed"
    # A ticket no tool made, claimed three times: pushed back twice, then kept as an unverified claim.
    h.fake.script("figures", [text("I've opened ticket TKT-99."), text("TKT-99 is open."), text("TKT-99 is handled.")])
    assert "ticket TKT-99" in h.run(agent, "ticket?")["output"]["unverified_claims"]
    metrics = h.api.get(f"/v1/agents/{agent}/versions/1/metrics").json()
    assert metrics["object"] == "version_metrics" and metrics["version"] == 1
    assert metrics["runs"] == 3 and metrics["completed"] == 2 and metrics["failed"] == 1
    assert metrics["handoffs"] == 1 and metrics["tool_failures"] == 0
    assert metrics["unverified_claims"] == 1 and isinstance(metrics["p50_ms"], int) and metrics["p50_ms"] >= 0
    later = h.api.get(f"/v1/agents/{agent}/versions/1/metrics", {"since": "2999-01-01"}).json()
    assert later["runs"] == 0 and later["p50_ms"] is None
    assert h.api.get(f"/v1/agents/{agent}/versions/5/metrics").status_code == 404
    # The test panel's runs are not the version's traffic.
    h.fake.script("figures", [text("Hi.")])
    h.run(agent, "hi", sandbox=True)
    assert h.api.get(f"/v1/agents/{agent}/versions/1/metrics").json()["runs"] == 3


def test_the_split_draws_by_weight():
    traffic = [{"version": 1, "weight": 10}, {"version": 2, "weight": 90}]
    drawn = [traffic_version(traffic, "agt_1", f"ses_{n}") for n in range(2000)]
    share = drawn.count(1) / len(drawn)
    assert 0.06 < share < 0.14  # about 10%
    assert traffic_version(traffic, "agt_1", "ses_7") == traffic_version(traffic, "agt_1", "ses_7")
    assert traffic_version([{"version": 3, "weight": 0}, {"version": 4, "weight": 100}], "agt_1", None) == 4


def test_the_figures_of_several_versions_read_together_are_each_versions_own(h: Harness):
    from datetime import timedelta

    from django.utils import timezone

    from agents.models import Agent, AgentVersion
    from runs.selectors import version_metrics, versions_metrics

    agent_id = two_versions(h, "together")
    assert h.run(agent_id, "hi", version=1)["status"] == "completed"
    assert h.run(agent_id, "hi again", version=1)["status"] == "completed"
    assert h.run(agent_id, "hello")["status"] == "completed"  # the latest: version 2
    agent = Agent.objects.get(pk=agent_id)
    since = timezone.now() - timedelta(days=1)
    together = versions_metrics(agent=agent, numbers=[2, 1, 3], since=since)
    assert together[1]["runs"] == 2 and together[2]["runs"] == 1 and together[3]["runs"] == 0
    assert together[3]["p50_ms"] is None and together[3]["handoffs"] == 0
    for number in (1, 2):
        version = AgentVersion.objects.get(agent=agent, number=number)
        assert version_metrics(agent=agent, version=version, since=since) == together[number]
