"""Releasing safely in the dashboard, in a real Chromium (SPEC §4 "Checks and traffic", §8; issue 30): a business adds
a check, runs it, saves a test-panel answer as a check; a regression stops the publish with the failing check and
why, and "Publish anyway" with a note goes through, marked on the version; on the versions page it splits the
traffic 50/50 with each version's figures, and rolls back. Screenshots under var/screenshots/ (releases-*)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Agent, AgentVersion
from agents.services import agent_create, agent_publish
from checks.models import Check
from fakes.llm import text
from tests.conftest import Tenant
from tests.dashboard.conftest import screenshot
from tests.dashboard.test_browser import every_control_named, no_sideways_scroll, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def one_at_a_time(settings: Any) -> None:
    settings.KAGENT_CHECK_CONCURRENCY = 1


def agent_for(tenant: Tenant, fake_llm: Any, answer: str) -> Agent:
    fake_llm.script("release", [text(answer)] * 50)
    model = {"provider": "openai_compatible", "name": "script:release"}
    return agent_create(project=tenant.project, name="Front desk", config={"model": model})


def test_a_check_stops_a_regression_and_publish_anyway_is_recorded(alice, live_server, page, fake_llm, start_worker):
    start_worker(fake_llm.worker_env())  # Run checks queues them for a worker
    agent = agent_for(alice, fake_llm, "Our returns window is 30 days.")
    sign_in(page, alice)
    page.goto(f"/agents/{agent.pk}/")
    checks = page.locator("#checks")
    checks.get_by_label("Name").fill("Returns window")
    checks.get_by_label("The customer says").fill("how long do I have to return?")
    checks.get_by_label("The answer says").fill("30 days")
    checks.get_by_role("button", name="Add check").click()
    expect(page.locator(".messages")).to_contain_text("Check added")
    page.locator("#checks").get_by_role("button", name="Run checks on the draft").click()
    expect(page.locator(".messages")).to_contain_text("The checks are running on the draft")
    # The card follows the run by itself until its results are in.
    expect(page.locator("#checks-last")).to_contain_text("all 1 passed", timeout=30_000)
    expect(page.locator("#checks-table")).to_contain_text("passed")
    expect(page.locator("#checks").get_by_role("button", name="Run checks on the draft")).to_be_enabled()
    every_control_named(page)

    # A regression: the model now answers otherwise, and publishing stops with the reason.
    fake_llm.script("release", [text("Returns? Please ask in a shop.")] * 50)
    page.locator("#publish").get_by_label("Note").fill("Shorter answers")
    page.locator("#publish").get_by_role("button", name="Publish").click()
    failures = page.locator("#publish-check-failures")
    expect(failures).to_contain_text("Returns window")
    expect(failures).to_contain_text("doesn't say '30 days'")
    assert not AgentVersion.objects.filter(agent=agent).exists()
    no_sideways_scroll(page)
    screenshot(page, "releases-publish-refused")

    page.locator("#publish").get_by_label("Note").fill("Known: the returns page moves tomorrow")
    page.locator("#publish").get_by_label("Publish anyway").check()
    page.locator("#publish").get_by_role("button", name="Publish").click()
    page.wait_for_url(re.compile(rf"/agents/{agent.pk}/versions/$"))
    version = AgentVersion.objects.get(agent=agent)
    assert version.forced and version.check_failures[0]["name"] == "Returns window"
    expect(page.locator("#version-1")).to_contain_text("published despite failed checks")


def test_a_test_panel_answer_saved_as_a_check(alice, live_server, page, fake_llm, start_worker):
    start_worker(fake_llm.worker_env())
    agent = agent_for(alice, fake_llm, "Hello! How can I help?")
    sign_in(page, alice)
    page.goto(f"/agents/{agent.pk}/")
    page.get_by_label("Message").fill("hello")
    page.get_by_role("button", name="Send").click()
    turn = page.locator("#panel .turn").last
    expect(turn.locator(".bubble.assistant")).to_contain_text("How can I help", timeout=20000)
    turn.get_by_role("button", name="Keep as a check").click()
    expect(page.locator(".messages")).to_contain_text("Kept as a check")
    check = Check.objects.get(agent=agent)
    assert check.input == "hello" and check.expect == {"tools_called": []}


def test_a_split_with_figures_and_a_rollback_on_the_versions_page(alice, live_server, page, fake_llm):
    agent = agent_for(alice, fake_llm, "Hello.")
    agent_publish(agent=agent, note="first")
    agent_publish(agent=agent, note="second")
    sign_in(page, alice)
    page.goto(f"/agents/{agent.pk}/versions/")
    page.get_by_label("Traffic % for version 1").fill("50")
    page.get_by_label("Traffic % for version 2").fill("50")
    page.get_by_role("button", name="Save the split").click()
    expect(page.locator(".messages")).to_contain_text("The split applies to the next runs")
    agent.refresh_from_db()
    assert sorted(agent.traffic, key=lambda e: e["version"]) == [
        {"version": 1, "weight": 50},
        {"version": 2, "weight": 50},
    ]
    expect(page.locator("#version-1")).to_contain_text("50%")
    no_sideways_scroll(page)
    screenshot(page, "releases-versions-desktop")

    page.get_by_label("Traffic % for version 1").fill("70")
    page.get_by_role("button", name="Save the split").click()
    expect(page.locator(".messages")).to_contain_text("weights sum to 120")

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#version-1").get_by_role("button", name="Roll back to this version").click()
    expect(page.locator(".messages")).to_contain_text("runs version 1 now")
    agent.refresh_from_db()
    assert agent.traffic == [{"version": 1, "weight": 100}]


def test_the_versions_page_fits_a_phone(alice, live_server, phone_page, fake_llm):
    agent = agent_for(alice, fake_llm, "Hello.")
    agent_publish(agent=agent, note="A note long enough to wrap on a phone " * 3)
    sign_in(phone_page, alice)
    phone_page.goto(f"/agents/{agent.pk}/versions/")
    expect(phone_page.locator("#version-1")).to_be_visible()
    no_sideways_scroll(phone_page)
    screenshot(phone_page, "releases-versions-phone")
