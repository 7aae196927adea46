"""Approvals on the desk and in the test panel, in a real Chromium (SPEC §5 "Approvals", §8): a person of the team
sees the action waiting with its arguments and the conversation, approves one (it runs once) and denies another
(nothing is done, the agent says so); the test panel answers a sandbox run's approval itself; and at a phone's width
nothing scrolls sideways. Screenshots under var/screenshots/ (approvals-*)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.services import agent_create, agent_publish
from conversations.identity import EndUserClaim
from conversations.models import Session
from conversations.services import session_create
from desk.models import Ticket
from fakes.llm import calls, text
from runs import engine
from runs.models import Run, ToolCall
from runs.services import run_create
from tests.conftest import Tenant, wait_for
from tests.dashboard.conftest import screenshot
from tests.dashboard.test_browser import every_control_named, nav, no_sideways_scroll, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ASK = {"builtin": {"create_ticket": {"enabled": True, "approval": "ask"}}}


def waiting(tenant: Tenant, fake_llm: Any, *, customer: str, title: str, script: str) -> tuple[Run, Session]:
    """A customer's run waiting for approval of the ticket it wants to open."""
    fake_llm.script(
        script,
        [
            calls(("create_ticket", {"title": title, "description": "Arrived broken <b>twice</b>"})),
            text("Thanks for waiting: I've opened a ticket for this."),
        ],
    )
    model = {"provider": "openai_compatible", "name": f"script:{script}"}
    agent = agent_create(project=tenant.project, name=f"Support {script}", config={"model": model, "tools": ASK})
    agent_publish(agent=agent, note="")
    claim = EndUserClaim(external_id=customer)
    session = session_create(project=tenant.project, api_key=None, agent_id=agent.pk, end_user=claim)
    run = run_create(
        project=tenant.project, api_key=None, agent_id=agent.pk, text="refund please", session_id=session.pk,
        end_user=claim,
    )  # fmt: skip
    engine.run_execute(run.pk)
    run.refresh_from_db()
    assert run.status == "requires_action"
    return run, session


def test_the_team_approves_and_denies_actions_on_the_desk(alice, live_server, page, fake_llm):
    approve_me, session = waiting(alice, fake_llm, customer="cust-42", title="Refund 8812", script="a")
    deny_me, _ = waiting(alice, fake_llm, customer="cust-43", title="Refund 9000", script="b")
    sign_in(page, alice)
    nav(page, "Desk")
    rows = page.locator("#approvals > li")
    expect(rows).to_have_count(2)
    first = page.locator(f"#approval-{approve_me.pk}")
    expect(first).to_contain_text("create_ticket")
    expect(first).to_contain_text("Refund 8812")
    expect(first).to_contain_text("Arrived broken <b>twice</b>")  # the arguments as text, never markup
    expect(first.get_by_role("link", name="cust-42")).to_have_attribute("href", f"/sessions/{session.pk}/")
    every_control_named(page)
    no_sideways_scroll(page)
    screenshot(page, "approvals-desk-desktop")

    first.get_by_label("Note (optional)").fill("Photos checked.")
    first.get_by_role("button", name="Approve").click()
    expect(page.locator(".messages")).to_contain_text("Approved")
    expect(page.locator("#approvals > li")).to_have_count(1)
    call = ToolCall.objects.get(run=approve_me)
    assert call.approval["decision"] == "approve" and call.approval["note"] == "Photos checked."
    assert call.approval["decided_by"]["type"] == "member"

    page.locator(f"#approval-{deny_me.pk}").get_by_role("button", name="Deny").click()
    expect(page.locator(".messages")).to_contain_text("Denied")
    expect(page.locator("#approvals")).to_have_count(0)
    expect(page.get_by_text("No action is waiting for approval.")).to_be_visible()

    # The runs go on (a worker's job; done here): one ticket, made once; the denied one made nothing.
    for run in (approve_me, deny_me):
        engine.run_execute(run.pk)
    assert [t.title for t in Ticket.objects.all()] == ["Refund 8812"]
    assert ToolCall.objects.get(run=deny_me).result["error"]["code"] == "approval_denied"


def test_the_desk_fits_a_phone_with_an_approval_waiting(alice, live_server, phone_page, fake_llm):
    waiting(
        alice,
        fake_llm,
        customer="cust-with-a-rather-long-identifier-0123456789",
        title="Refund " + "x" * 110,
        script="p",
    )
    sign_in(phone_page, alice)
    phone_page.goto("/desk/")
    expect(phone_page.locator("#approvals > li")).to_have_count(1)
    no_sideways_scroll(phone_page)
    screenshot(phone_page, "approvals-desk-phone")


def test_the_test_panel_answers_an_approval_itself(alice, live_server, page, fake_llm, start_worker):
    start_worker(fake_llm.worker_env())
    fake_llm.script("panel", [calls(("create_ticket", {"title": "Test", "description": "d"})), text("Ticket opened.")])
    model = {"provider": "openai_compatible", "name": "script:panel"}
    agent = agent_create(project=alice.project, name="Panel agent", config={"model": model, "tools": ASK})
    sign_in(page, alice)
    page.goto(f"/agents/{agent.pk}/")
    page.get_by_label("Signed-in customer ID").fill("cust-42")
    page.get_by_label("Message").fill("open a ticket")
    page.get_by_role("button", name="Send").click()
    turn = page.locator("#panel .turn").last
    expect(turn).to_contain_text("A person's turn.", timeout=20000)
    turn.get_by_role("button", name="Approve").click()
    expect(turn.locator(".bubble.assistant")).to_contain_text("Ticket opened.", timeout=20000)
    run = Run.objects.get(agent=agent)
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "completed", message="the panel run")
    call = ToolCall.objects.get(run=run)
    assert call.simulated and call.approval["decision"] == "approve"  # approved, then simulated as a test action
    assert not Ticket.objects.exists()
    assert re.search(r"approval", page.content())
