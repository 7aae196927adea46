"""The desk's live handoff in a real Chromium over real HTTP (SPEC §4 "Live handoff", §8): a person of the team
finds the conversation the agent handed over in the inbox, reads it, sees the customer's next message arrive without
a reload, replies (the customer's side reads it through the API, signed), hands it back and closes it; and all of it
on a phone's width, nothing scrolling sideways. Screenshots under var/screenshots/ (desk-*)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from conversations import services as conversation
from conversations.models import Session
from kagent import pubsub, streams
from tests.conftest import Tenant, wait_for
from tests.dashboard.conftest import new_page, screenshot
from tests.dashboard.test_browser import nav, no_sideways_scroll, sign_in
from tests.dashboard.test_desk_inbox import TRANSFERRED, handed_off

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = '<img src=x onerror="window.kagentOwned=1"> & <b>bold</b>'
AT_THE_END = "t => t.scrollTop + t.clientHeight >= t.scrollHeight - 2"
LONG_WORD = "https://shop.example/orders/8812/tracking/" + "x" * 120  # one unbroken word, longer than a phone


def api(tenant: Tenant, live_server: Any) -> httpx.Client:
    """The business's server: the project's secret key against the live server."""
    return httpx.Client(
        base_url=f"{live_server.url}/v1", headers={"Authorization": f"Bearer {tenant.secret_key}"}, timeout=10
    )


def status_of(tenant: Tenant, live_server: Any, session: Session) -> str:
    with api(tenant, live_server) as client:
        return str(client.get(f"/sessions/{session.pk}").json()["status"])


@pytest.fixture
def team_member(alice: Tenant, monkeypatch: Any) -> Iterator[Tenant]:
    """alice, signed "Sam" (her first name). A conversation's page follows its events for as long as it is open, and
    the stream of a page that was closed ends at its next keep-alive: sent every half second here, and the test
    waits for its pages' streams to end, so none outlives it (the live server serves the whole test session)."""
    alice.user.name = "Sam Jones"
    alice.user.save()
    monkeypatch.setattr(streams, "KEEPALIVE_S", 0.5)
    yield alice
    open_streams = f"kagent:streams:member:{alice.user.pk}"
    wait_for(lambda: pubsub.redis_client().zcard(open_streams) == 0, timeout=10, message="the streams' end")


def test_the_team_answers_a_handed_off_conversation_live(team_member, live_server, page, fake_llm):
    alice = team_member
    session = handed_off(alice, fake_llm, customer="cust-42", script="live")
    answered = handed_off(alice, fake_llm, customer=None, script="answered")
    conversation.session_message_create(session=answered, role="team", content="We are on it.", author="Mona")

    # --- the inbox: the waiting customer first ---------------------------------------------------------------------
    sign_in(page, alice)
    nav(page, "Desk")
    rows = page.locator("#inbox > li")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("cust-42")
    expect(rows.nth(0)).to_contain_text("waiting under a minute")
    expect(rows.nth(0)).to_contain_text(f"Agent: {TRANSFERRED}")
    expect(rows.nth(1)).to_contain_text("Anonymous visitor")
    expect(rows.nth(1)).to_contain_text("answered")
    expect(rows.nth(1)).to_contain_text("Mona (team): We are on it.")
    no_sideways_scroll(page)
    screenshot(page, "desk-inbox-desktop")

    # --- the conversation ------------------------------------------------------------------------------------------
    rows.nth(0).get_by_role("link", name="cust-42").click()
    page.wait_for_url(re.compile(rf"/sessions/{session.pk}/$"))
    expect(page.locator("h1")).to_have_text("Conversation with cust-42")
    thread = page.locator("[data-thread]")
    expect(thread.locator(".said")).to_have_count(2)
    expect(thread.locator(".said.user")).to_contain_text("My parcel arrived broken, I want a person")
    expect(thread.locator(".said.assistant")).to_contain_text(TRANSFERRED)
    status = page.locator("[data-session-status]")
    expect(status).to_have_text("handed off")
    page.evaluate("window.kagentMarker = 'not reloaded'")
    expect(page.locator("[data-thread].following")).to_have_count(1)  # following its events

    # The customer writes (the business's server relays it): it appears without a reload, as text.
    with api(alice, live_server) as client:
        written = client.post(f"/sessions/{session.pk}/messages", json={"role": "user", "content": "Hello? Anyone?"})
        assert written.status_code == 201, written.text
        client.post(f"/sessions/{session.pk}/messages", json={"role": "user", "content": HOSTILE})
    expect(thread.locator(".said.user").nth(1)).to_contain_text("Hello? Anyone?")
    hostile = thread.locator(".said.user").nth(2).locator(".bubble")
    expect(hostile).to_have_text(HOSTILE)
    assert thread.locator("img, b").count() == 0 and page.evaluate("window.kagentOwned") is None
    expect(thread.locator(".said.user").nth(1).locator(".speaker")).to_contain_text("Customer")
    assert page.evaluate("window.kagentMarker") == "not reloaded"

    # --- Send reply --------------------------------------------------------------------------------------------------
    reply = "Hi, I'm Sam from the team. Sorry about the parcel: a new one leaves today."
    page.get_by_label("Reply").fill(reply)
    page.get_by_role("button", name="Send reply").click()
    mine = thread.locator(".said.team")
    expect(mine).to_have_count(1)
    expect(mine).to_contain_text("Sam (team)")
    expect(mine.locator(".bubble")).to_have_text(reply)
    expect(page.get_by_label("Reply")).to_have_value("")
    page.wait_for_timeout(1000)  # the stream brings the same message: shown once
    expect(mine).to_have_count(1)
    assert page.evaluate("window.kagentMarker") == "not reloaded"
    with api(alice, live_server) as client:
        said = client.get(f"/sessions/{session.pk}/messages", params={"limit": 100}).json()["data"]
    assert [(m["role"], m["author"]) for m in said if m["content"] == reply] == [("team", "Sam")]
    screenshot(page, "desk-conversation-desktop")

    # A reply the API refuses: its message next to the field, nothing sent.
    page.get_by_label("Reply").fill("   ")
    page.get_by_role("button", name="Send reply").click()
    expect(page.locator("#f-content-error")).to_have_text("Write the message first.")
    expect(mine).to_have_count(1)

    # --- a change made elsewhere shows at once: handed back over the API -----------------------------------------
    with api(alice, live_server) as client:
        assert client.patch(f"/sessions/{session.pk}", json={"status": "open"}).status_code == 200
    expect(status).to_have_text("open")
    expect(page.get_by_role("button", name="Hand back to agent")).to_be_hidden()
    expect(page.get_by_text("Replying takes the conversation from the agent")).to_be_visible()
    assert page.evaluate("window.kagentMarker") == "not reloaded"
    # Replying takes it from the agent again.
    page.get_by_label("Reply").fill("I'll stay with you on this one.")
    page.get_by_role("button", name="Send reply").click()
    expect(status).to_have_text("handed off")
    expect(page.get_by_role("button", name="Hand back to agent")).to_be_visible()
    assert status_of(alice, live_server, session) == "handed_off"

    # --- Hand back to agent, then Close conversation -----------------------------------------------------------------
    page.get_by_role("button", name="Hand back to agent").click()
    expect(page.locator(".messages")).to_contain_text("Handed back to the agent")
    expect(status).to_have_text("open")
    assert status_of(alice, live_server, session) == "open"
    nav(page, "Desk")
    expect(page.locator("#inbox > li")).to_have_count(1)  # the agent has it again: off the inbox
    page.goto(f"/sessions/{session.pk}/")

    page.get_by_role("button", name="Close conversation").click()
    expect(page.locator(".messages")).to_contain_text("Conversation closed.")
    expect(status).to_have_text("closed")
    expect(page.get_by_role("button", name="Close conversation")).to_be_hidden()
    assert status_of(alice, live_server, session) == "closed"
    expect(thread.locator(".said")).to_have_count(6)  # the whole thread, drawn again: nothing lost, nothing twice
    screenshot(page, "desk-conversation-closed-desktop")
    assert page.js_errors == []


@pytest.fixture
def narrow_phone(browser: Any, live_server: Any) -> Iterator[Any]:
    """375 px wide: the narrowest phone in common use."""
    page = new_page(
        browser,
        live_server,
        viewport={"width": 375, "height": 667},
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
    )
    yield page
    page.context.close()


def test_the_inbox_and_a_conversation_on_a_phone(team_member, live_server, narrow_phone, fake_llm):
    alice = team_member
    session = handed_off(alice, fake_llm, customer="customer-with-a-rather-long-external-id-0042", script="phone")
    for n in range(8):
        conversation.session_message_create(session=session, role="user", content=f"Message {n}: {LONG_WORD}")
    page = narrow_phone
    sign_in(page, alice)
    page.goto("/desk/?include_tests=true")
    expect(page.locator("#inbox > li")).to_have_count(1)
    no_sideways_scroll(page)
    screenshot(page, "desk-inbox-phone")

    page.locator("#inbox > li").first.get_by_role("link").click()
    page.wait_for_url(re.compile(rf"/sessions/{session.pk}/$"))
    thread = page.locator("[data-thread]")
    expect(thread.locator(".said")).to_have_count(10)
    no_sideways_scroll(page)
    # A long thread scrolls in its own box, shown from its newest message, with the reply box right below it.
    assert thread.evaluate(AT_THE_END), "the thread is not shown from its newest message"
    assert thread.evaluate("t => t.scrollHeight > t.clientHeight")
    conversation.session_message_create(session=session, role="user", content="One more thing!")
    expect(thread.locator(".said").last).to_contain_text("One more thing!")
    assert thread.evaluate(AT_THE_END), "the new message arrived out of view"
    field = page.get_by_label("Reply")
    field.scroll_into_view_if_needed()
    expect(thread.locator(".said").last).to_be_in_viewport()  # what is answered, and the answer, on one screen
    for control in (field, page.get_by_role("button", name="Send reply")):
        box = control.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, box
    screenshot(page, "desk-conversation-phone", full_page=False)
    screenshot(page, "desk-conversation-phone-full")

    field.fill("Thanks for waiting, we're on it.")
    page.get_by_role("button", name="Send reply").tap()
    expect(thread.locator(".said.team")).to_contain_text("Thanks for waiting, we're on it.")
    no_sideways_scroll(page)
    for name in ("Hand back to agent", "Close conversation"):
        button = page.get_by_role("button", name=name)
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 375, (name, box)
    page.get_by_role("button", name="Close conversation").tap()
    expect(page.locator("[data-session-status]")).to_have_text("closed")
    no_sideways_scroll(page)
    assert Session.objects.get(pk=session.pk).status == "closed"
    assert page.js_errors == []
