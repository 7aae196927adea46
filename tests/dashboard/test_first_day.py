"""A business owner's first day (issue 31), in a real Chromium as a new user goes through it: an agent saved without a
name says so in plain words, a secret key is copied with its Copy button (read back from the browser's clipboard),
then the README's own first-run commands, run with curl against the live server and a real Celery worker, answer;
a webhook endpoint added in the dashboard receives a signed test event on a real HTTPS receiver, verified with the
`standardwebhooks` package and the secret the Copy button gave.

Screenshots land in var/screenshots/ (first-day-*.png).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from playwright.sync_api import expect
from standardwebhooks import Webhook

from agents.models import Agent
from hooks.models import WebhookDelivery
from tests.dashboard.conftest import DESKTOP, PHONE, new_page, screenshot
from tests.dashboard.test_browser import no_sideways_scroll, sign_in
from tests.hooks.conftest import received

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_commands() -> tuple[str, str]:
    """The README's two first commands, as printed: the agents list under "Run it", the run under "Your first run"."""
    text = README.read_text()
    listing = re.search(r"^curl [^\n]*/v1/agents[^\n]*$", text, re.MULTILINE)
    first_run = text.split("**Your first run.**", 1)[1]
    block = re.search(r"```sh\n(.*?)```", first_run, re.DOTALL)
    assert listing and block, "the README no longer shows its first commands"
    return listing.group(0), block.group(1)


def as_typed(command: str, *, key: str, agent: str, origin: str) -> str:
    """What a reader types: the README's placeholders replaced by their own key, agent and address."""
    assert "ka_sk_…" in command and "http://127.0.0.1:8000" in command
    return command.replace("ka_sk_…", key).replace("agt_…", agent).replace("http://127.0.0.1:8000", origin)


def shell(command: str) -> Any:
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def with_clipboard(page: Any, live_server: Any) -> Any:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    return page


@pytest.mark.worker
def test_a_new_owner_names_an_agent_copies_a_key_and_gets_the_readmes_first_answer(
    alice, browser, live_server, start_worker
):
    call_command("kagent_demo_agent", project=alice.project.pk)  # as bin/run does
    demo = Agent.objects.get(project=alice.project, name="Demo assistant")
    start_worker()
    page = with_clipboard(new_page(browser, live_server, **DESKTOP), live_server)
    try:
        sign_in(page, alice)
        # A first agent, saved without a name: refused in plain words, next to the field.
        page.get_by_role("link", name="New agent").click()
        page.get_by_label("Instructions").fill("You answer customers of Acme Shoes.")
        page.get_by_role("button", name="Save").click()
        name = page.get_by_label("Name", exact=True)
        expect(name).to_have_attribute("aria-invalid", "true")
        expect(page.locator(f"#{name.get_attribute('aria-describedby').split()[0]}")).to_have_text(
            "Give the agent a name."
        )
        expect(page.get_by_label("Instructions")).to_have_value("You answer customers of Acme Shoes.")  # kept
        screenshot(page, "first-day-agent-without-a-name")
        name.fill("Front desk")
        page.get_by_role("button", name="Save").click()
        expect(page.locator("h1")).to_contain_text("Front desk")

        # A secret key, copied with its button: the clipboard holds exactly the key shown once.
        page.goto("/settings/api-keys/")
        page.get_by_label("Kind").select_option("secret")
        page.get_by_label("Name").fill("laptop")
        page.get_by_role("button", name="Create key").click()
        shown = page.locator("#new-key")
        expect(shown).to_have_text(re.compile(r"^ka_sk_"))
        page.get_by_role("button", name="Copy key").click()
        expect(page.get_by_role("button", name="Copied")).to_be_visible()
        key = page.evaluate("navigator.clipboard.readText()")
        assert key == shown.inner_text().strip()
        screenshot(page, "first-day-key-copied")
        assert page.js_errors == []
    finally:
        page.context.close()

    # The README's commands, typed with that key: the agents, then a first run and its answer.
    listing, first_run = readme_commands()
    agents = shell(as_typed(listing, key=key, agent=demo.pk, origin=live_server.url))
    assert {"Demo assistant", "Front desk"} <= {agent["name"] for agent in agents["data"]}
    run = shell(as_typed(first_run, key=key, agent=demo.pk, origin=live_server.url))
    assert run["status"] == "completed", run
    assert run["id"].startswith("run_") and run["version"] == 1
    assert run["output"]["text"].strip() and run["output"]["unverified_claims"] == []


def test_a_webhook_endpoint_added_in_the_dashboard_receives_a_signed_test_event(
    alice, browser, live_server, upstream, egress_settings
):
    url = f"https://tools.test:8443{upstream.respond('hook', json_body={'received': True})}"
    page = with_clipboard(new_page(browser, live_server, **DESKTOP), live_server)
    try:
        sign_in(page, alice)
        page.goto("/settings/webhooks/")
        page.get_by_label("URL").fill(url)
        page.get_by_label("ticket.created").check()
        page.get_by_role("button", name="Add endpoint").click()
        page.get_by_role("button", name="Copy secret").click()
        expect(page.get_by_role("button", name="Copied")).to_be_visible()
        secret = page.evaluate("navigator.clipboard.readText()")
        assert secret == page.locator("#endpoint-secret").inner_text().strip() and secret.startswith("whsec_")
        upstream.secrets = [secret]  # the receiver verifies every request with it too

        page.get_by_role("link", name="Open the endpoint").click()
        page.get_by_role("button", name="Send test event").click()
        expect(page.get_by_role("status").filter(has_text="Test event delivered (HTTP 200)")).to_be_visible()
        [(request, body)] = received(upstream)
        assert body["type"] == "ping" and request.headers["webhook-id"] == body["id"]
        assert Webhook(secret).verify(request.body, request.headers) == body  # as the business's server would
        delivery = WebhookDelivery.objects.get()
        assert delivery.status == "succeeded" and delivery.attempts == 1
        expect(page.locator("body")).to_contain_text("ping")  # in the endpoint's delivery log
        screenshot(page, "first-day-webhook-test-event")
        assert page.js_errors == []
    finally:
        page.context.close()


def test_the_first_days_pages_fit_a_phone(alice, browser, live_server):
    """The pages a first day goes through, at a phone's width: nothing scrolls sideways (looked at by eye too)."""
    page = new_page(browser, live_server, **PHONE)
    try:
        sign_in(page, alice)
        for path, name in [
            ("/agents/new/", "agent-new"),
            ("/settings/api-keys/", "api-keys"),
            ("/settings/webhooks/", "webhooks"),
        ]:
            page.goto(path)
            no_sideways_scroll(page)
            screenshot(page, f"first-day-phone-{name}")
        page.goto("/agents/new/")
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_text("Give the agent a name.").first).to_be_visible()
        no_sideways_scroll(page)
        screenshot(page, "first-day-phone-agent-without-a-name")
        assert page.js_errors == []
    finally:
        page.context.close()
