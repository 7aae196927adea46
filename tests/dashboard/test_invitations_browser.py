"""Invitations in a real Chromium over real HTTP (issue 27, item 1): an owner invites someone new and someone with an
account; each opens the mailed link, the first chooses a password, the second signs in and accepts."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core import mail

from kagent.models import Membership
from tests.conftest import Tenant
from tests.dashboard.conftest import new_page, screenshot
from tests.dashboard.test_browser import PASSWORD, every_control_named

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def sign_in(page: Any, email: str, password: str) -> None:
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


def mailed_link(email: str) -> str:
    message = [m for m in mail.outbox if m.to == [email]][-1]
    return re.search(r"https?://\S+/invitations/\S+/", message.body).group(0)


def test_invitees_join_by_the_mailed_link(alice: Tenant, bob: Tenant, live_server: Any, browser: Any, page: Any):
    page.goto("/login/")
    sign_in(page, alice.user.email, PASSWORD)
    page.wait_for_url(re.compile(r"/agents/$"))
    page.goto("/settings/members/")
    for email in ("carol@example.com", bob.user.email):
        page.locator("#member-form").get_by_label("Email").fill(email)
        page.get_by_role("button", name="Add member").click()
        expect_status = page.get_by_role("status")
        assert f"We sent an invitation to {email}" in expect_status.inner_text()
    invitations = page.locator("#invitations-table").inner_text()
    assert "carol@example.com" in invitations and "bob@example.com" in invitations
    every_control_named(page)
    screenshot(page, "desktop-members-invitations")

    # Someone new: the link, a password of their own, and they are in.
    carol = new_page(browser, live_server, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    carol.goto(mailed_link("carol@example.com"))
    carol.wait_for_url(re.compile(r"/invitations/accept/$"))  # the token is out of the address bar
    assert carol.locator("h1").inner_text() == "Join alice org"
    every_control_named(carol)
    screenshot(carol, "phone-invitation")
    carol.get_by_label("New password", exact=True).fill("carol's own password")
    carol.get_by_label("New password confirmation").fill("carol's own password")
    carol.get_by_role("button", name="Set password and join").click()
    carol.wait_for_url(re.compile(r"/agents/$"))
    assert "alice org / alice project" in carol.locator("header").inner_text()
    assert carol.js_errors == []
    carol.context.close()

    # An existing account: sign in first (the sign-in page brings bob back), then Accept invitation.
    other = new_page(browser, live_server, viewport={"width": 1280, "height": 900})
    other.goto(mailed_link(bob.user.email))
    other.get_by_role("link", name="Sign in").click()
    other.wait_for_url(re.compile(r"/login/\?next="))
    sign_in(other, bob.user.email, PASSWORD)
    other.wait_for_url(re.compile(r"/invitations/accept/$"))
    other.get_by_role("button", name="Accept invitation").click()
    other.wait_for_url(re.compile(r"/agents/$"))
    assert "alice org / alice project" in other.locator("header").inner_text()
    assert Membership.objects.filter(organization=alice.organization, user=bob.user).exists()
    assert other.js_errors == []
    other.context.close()

    page.reload()
    assert page.locator("#invitations-table").count() == 0  # both accepted: none pending
    assert page.js_errors == []
