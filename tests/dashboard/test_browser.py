"""The dashboard in a real Chromium over real HTTP: sign in, create a key, use it, revoke it with htmx; a phone."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.conftest import Tenant

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"


def sign_in(page: Any, tenant: Tenant) -> None:
    page.goto("/")
    page.wait_for_url(re.compile(r"/login/$"))
    page.get_by_label("Email").fill(tenant.user.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/agents/$"))
    assert page.locator("h1").inner_text() == "Agents"


def agents_status(live_server: Any, raw_key: str) -> httpx.Response:
    return httpx.get(f"{live_server.url}/v1/agents", headers={"Authorization": f"Bearer {raw_key}"}, timeout=10)


def test_sign_in_create_use_and_revoke_a_key(alice, bob, live_server, page):
    sign_in(page, alice)
    assert "alice org / alice project" in page.locator("header").inner_text()

    page.get_by_role("link", name="API keys").click()
    page.wait_for_url(re.compile(r"/settings/api-keys/$"))
    rows_before = page.locator("#keys tbody tr").count()
    assert rows_before == 2  # alice's two test keys; none of bob's

    page.get_by_label("Kind").select_option("secret")
    page.get_by_label("Name").fill("browser test")
    # A marker that survives only if the page is not reloaded: creating and revoking are swaps, not navigations.
    page.evaluate("window.kagentMarker = 'still here'")
    page.get_by_role("button", name="Create key").click()
    revealed = page.locator("#new-key")
    revealed.wait_for()
    raw_key = revealed.inner_text().strip()
    assert re.fullmatch(r"ka_sk_[A-Za-z0-9_-]{43}", raw_key)
    assert page.evaluate("window.kagentMarker") == "still here"
    assert page.locator("#keys tbody tr").count() == rows_before + 1
    hint = f"{raw_key[:6]}…{raw_key[-4:]}"
    row = page.locator("#keys tbody tr", has_text=hint)
    assert row.count() == 1
    assert "browser test" in row.inner_text()

    # Shown once: a reload is a plain GET that shows only the hint.
    page.reload()
    assert page.locator("#new-key").count() == 0
    assert raw_key not in page.content()
    assert page.locator("#keys tbody tr").count() == rows_before + 1, "the reload created no second key"
    assert page.locator("#keys tbody tr", has_text=hint).count() == 1

    # The key works over real HTTP.
    response = agents_status(live_server, raw_key)
    assert response.status_code == 200, response.text
    assert response.json()["data"] == []

    # Revoke with the htmx button: confirm the dialog, the row is swapped in place.
    dialogs: list[str] = []

    def accept(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    page.evaluate("window.kagentMarker = 'before revoke'")
    row = page.locator("#keys tbody tr", has_text=hint)
    row.get_by_role("button", name="Revoke").click()
    page.locator("#keys tbody tr", has_text=hint).filter(has_text="revoked").wait_for()
    assert dialogs and "Revoke this key?" in dialogs[0]
    assert page.evaluate("window.kagentMarker") == "before revoke", "revoking reloaded the page"
    assert page.locator("#keys tbody tr", has_text=hint).get_by_role("button", name="Revoke").count() == 0
    # The other keys still have their button.
    assert page.get_by_role("button", name="Revoke").count() == rows_before

    response = agents_status(live_server, raw_key)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "api_key_revoked"
    # Someone else's project is untouched.
    assert agents_status(live_server, bob.secret_key).status_code == 200
    assert agents_status(live_server, alice.secret_key).status_code == 200
    assert page.js_errors == []


def test_dismissing_the_confirm_revokes_nothing(alice, live_server, page):
    sign_in(page, alice)
    page.goto("/settings/api-keys/")
    page.on("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Revoke").first.click()
    page.wait_for_timeout(500)
    assert page.locator("#keys").inner_text().count("revoked") == 0
    assert agents_status(live_server, alice.secret_key).status_code == 200
    assert page.js_errors == []


def test_sign_out(alice, live_server, page):
    sign_in(page, alice)
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(r"/login/$"))
    page.goto("/settings/api-keys/")
    page.wait_for_url(re.compile(r"/login/\?next="))


def overflow(page: Any) -> dict[str, int]:
    # Not window.innerWidth: a mobile browser widens the layout viewport to fit content that overflows.
    sizes = page.evaluate("() => ({page: document.documentElement.scrollWidth, body: document.body.scrollWidth})")
    sizes["viewport"] = page.viewport_size["width"]
    return sizes


def inside_viewport(page: Any, locator: Any) -> bool:
    box = locator.bounding_box()
    width = page.viewport_size["width"]
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5


def test_phone_sized_nav_and_keys_table_are_usable(alice, live_server, phone_page):
    page = phone_page
    sign_in(page, alice)
    sizes = overflow(page)
    assert sizes["page"] <= sizes["viewport"], f"the agents page scrolls sideways: {sizes}"

    nav_link = page.get_by_role("link", name="API keys")
    assert nav_link.is_visible() and inside_viewport(page, nav_link)
    assert inside_viewport(page, page.get_by_role("button", name="Sign out"))
    nav_link.tap()
    page.wait_for_url(re.compile(r"/settings/api-keys/$"))

    # Create a key so the revealed key (a long unbroken string) is on the page too.
    page.get_by_role("button", name="Create key").tap()
    page.locator("#new-key").wait_for()

    sizes = overflow(page)
    assert sizes["page"] <= sizes["viewport"], f"the API keys page scrolls sideways: {sizes}"
    table_box = page.locator(".scroll:has(#keys)")
    for locator in (
        page.locator("#new-key"),
        table_box,
        page.get_by_label("Kind"),
        page.get_by_label("Name"),
        page.get_by_role("button", name="Create key"),
    ):
        assert inside_viewport(page, locator), locator

    # The table is wider than a phone: it scrolls inside its own box, and its Revoke buttons can be reached.
    widths = table_box.evaluate("box => ({scroll: box.scrollWidth, client: box.clientWidth})")
    assert widths["client"] <= sizes["viewport"]
    assert widths["scroll"] > widths["client"], "six columns don't fit 390px: the box should scroll"
    revoke = page.get_by_role("button", name="Revoke").first
    revoke.scroll_into_view_if_needed()
    assert inside_viewport(page, revoke)
    assert table_box.evaluate("box => box.scrollLeft") > 0
    assert overflow(page)["page"] <= sizes["viewport"]
    assert page.js_errors == []
