"""The chat widget in a real Chromium, on a business's page served from another origin than the API (a loopback
server of its own, so CORS is really in play), talking to a published agent through a real Celery worker and the
scripted model: a conversation with a handoff and a ticket, on a desktop and at a phone's 390x844; a page whose
origin the key doesn't list gets nothing; the dashboard's API keys page sets the allowed origins. The live handoff
(SPEC §4): the team's replies written through the API appear in the thread as they are written, the customer's
messages go to the team while it holds the conversation, the agent answers again once it is handed back, a reload
keeps the thread and follows the conversation on; at a phone's 375 px too.

Screenshots land in var/screenshots/ (widget-*.png).
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from playwright.sync_api import expect

from conversations.models import Message, Session
from desk.models import Handoff, Ticket
from fakes.llm import Fault, calls, text
from kagent import pubsub, streams, throttle
from kagent.models import ApiKey
from kagent.services import api_key_origins_update
from runs.models import Run, ToolCall
from tests.conftest import Tenant, wait_for
from tests.dashboard.conftest import DESKTOP, PHONE, new_page, screenshot
from tests.dashboard.test_browser import no_sideways_scroll, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

LIVE = 30_000  # ms: a run through a real worker
HANDOFF = ("transfer_to_human", {"reason_type": "complaint", "summary": "Boots arrived with a torn sole"})
TICKET = ("create_ticket", {"title": "Torn sole on order 8812", "description": "Boots arrived damaged."})


class ShopSite:
    """The business's own website: pages on another loopback origin than the API, each embedding the widget."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        pages = self.pages

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = pages.get(self.path.split("?")[0])
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write((body or "not found").encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self, path: str, script_attributes: dict[str, str], *, then: str = "", load: str = "async") -> str:
        attributes = " ".join(f'{name}="{html.escape(value)}"' for name, value in script_attributes.items())
        self.pages[path] = (
            "<!doctype html><html lang=en><head><meta charset=utf-8>"
            '<meta name="viewport" content="width=device-width, initial-scale=1"><title>Acme Shoes</title></head>'
            "<body><h1>Acme Shoes</h1><p>Boots, sandals and sneakers.</p>"
            f"<script {attributes} {load}></script>{then}</body></html>"
        )
        return self.origin + path


@pytest.fixture
def shop() -> Iterator[ShopSite]:
    site = ShopSite()
    yield site
    site.server.shutdown()
    site.server.server_close()


@pytest.fixture(autouse=True)
def streams_end_with_their_page(monkeypatch: Any, transactional_db: Any) -> Iterator[None]:
    """The widget follows its conversation's events for as long as its page is open, and a WSGI server notices a
    closed page only when its next keep-alive can't be written: short keep-alives here, and each test waits until
    the streams its pages held (its keys' places) have ended, so none outlives its test (holding a thread of the
    live server)."""
    monkeypatch.setattr(streams, "KEEPALIVE_S", 0.5)
    yield
    client = pubsub.redis_client()
    keys = list(ApiKey.objects.values_list("pk", flat=True))

    def ended() -> bool:
        places = [name for key in keys for name in client.scan_iter(f"kagent:streams:key:{key}:*")]
        return all(not client.zcard(name) for name in places)

    wait_for(ended, timeout=15, message="the closed pages' event streams to end")


def publish_agent(tenant: Tenant, fake_llm: Any, script: str, *, greeting: str | None = None) -> str:
    config: dict[str, Any] = {
        "model": {"provider": "openai_compatible", "name": f"script:{script}"},
        "tools": {"builtin": {"create_ticket": {"enabled": True}}},
    }
    if greeting is not None:
        config["greeting"] = greeting
    api = tenant.client()
    response = api.post("/v1/agents", {"name": "Front desk", "config": config}, format="json")
    assert response.status_code == 201, response.json()
    agent = response.json()["id"]
    assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
    return str(agent)


def end_user_token(tenant: Tenant, sub: str) -> str:
    secret = tenant.client().get("/v1/end_user_secret").json()["secret"]
    return jwt.encode({"sub": sub, "exp": int(time.time()) + 600}, secret, "HS256")


def allow(tenant: Tenant, *origins: str) -> None:
    key = ApiKey.objects.get(project=tenant.project, kind=ApiKey.Kind.PUBLISHABLE)
    api_key_origins_update(project=tenant.project, key_id=key.pk, allowed_origins=list(origins))


def widget_page(tenant: Tenant, live_server: Any, shop: ShopSite, agent: str, **extra: str) -> str:
    return shop.page(
        "/",
        {
            "src": f"{live_server.url}/widget.js",
            "data-key": tenant.publishable_key,
            "data-agent": agent,
            "data-title": "Acme Shoes support",
            **extra,
        },
    )


def script_conversation(fake_llm: Any, script: str) -> None:
    # One answer per assistant message already in the conversation: a first reply, then the handoff and a ticket.
    fake_llm.script(
        script,
        [
            text("Sorry to hear that. What is wrong with them?"),
            calls(HANDOFF, TICKET),
            text("I've passed this to our team; a person will continue here."),
        ],
    )


def send(page: Any, message: str) -> None:
    page.get_by_label("Message").fill(message)
    page.get_by_role("button", name="Send").click()


def converse(page: Any, url: str) -> Any:
    """A customer's conversation on the shop's page; returns the conversation log."""
    page.goto(url)
    launcher = page.get_by_role("button", name="Chat with us")
    launcher.click()
    dialog = page.get_by_role("dialog", name="Acme Shoes support")
    expect(dialog).to_be_visible()
    expect(page.get_by_label("Message")).to_be_focused()  # focus moves into the chat
    log = page.get_by_role("log", name="Conversation")
    expect(log).to_have_attribute("aria-live", "polite")

    send(page, "My new boots are damaged")
    expect(log.locator(".message.user")).to_have_text(["You said:My new boots are damaged"])
    expect(log.locator(".message.assistant")).to_contain_text(["What is wrong with them?"], timeout=LIVE)
    expect(page.get_by_label("Message")).to_be_focused()

    page.get_by_label("Message").fill("The sole is torn. I want to talk to a person.")
    page.get_by_label("Message").press("Enter")  # Enter sends, as in any chat
    expect(log.locator(".message.assistant").nth(1)).to_contain_text("a person will continue here", timeout=LIVE)
    return log


def receipts_shown(log: Any, tenant: Tenant, *, ticket_made: bool = True) -> Handoff:
    """The handoff and the ticket number as the tools made them, each shown once, before the answer; a ticket the
    tools refused (an anonymous customer gets no action tools) is not shown at all."""
    handoff = Handoff.objects.get(project=tenant.project)
    expect(log.locator(".notice.handoff")).to_have_count(1)
    expect(log.locator(".notice.handoff")).to_contain_text("transferred to a person from the team")
    if ticket_made:
        ticket = Ticket.objects.get(project=tenant.project)
        expect(log.locator(".notice.ticket")).to_have_text(
            f"Ticket {ticket.display_number} is open. Keep this number for reference."
        )
    else:
        assert not Ticket.objects.exists()
        expect(log.locator(".notice.ticket")).to_have_count(0)
    order = log.locator(".message, .notice").evaluate_all("nodes => nodes.map(n => n.className)")
    tickets = ["notice ticket"] if ticket_made else []
    first, handed_off = ["message user", "message assistant"], ["message user", "notice handoff", *tickets]
    assert order == [*first, *handed_off, "message assistant"]
    return handoff


def test_a_customer_talks_to_the_agent_on_the_shops_site_and_is_handed_to_a_person(
    alice, live_server, browser, shop, start_worker, fake_llm, monkeypatch
):
    script_conversation(fake_llm, "widget-desktop")
    agent = publish_agent(alice, fake_llm, "widget-desktop")
    allow(alice, shop.origin)
    start_worker(fake_llm.worker_env())
    token = end_user_token(alice, "cust-42")
    url = widget_page(alice, live_server, shop, agent, **{"data-end-user-token": token})
    assert not url.startswith(live_server.url)  # the page and the API are different origins

    page = new_page(browser, live_server, **DESKTOP)
    try:
        log = converse(page, url)
        handoff = receipts_shown(log, alice)
        ticket = Ticket.objects.get(project=alice.project)
        screenshot(page, "widget-desktop", full_page=False)

        # One session for the conversation, the verified customer's, kept for the tab.
        session = Session.objects.get(project=alice.project)
        assert session.end_user is not None and session.end_user.external_id == "cust-42"
        assert handoff.session_id == session.pk and ticket.session_id == session.pk
        assert Run.objects.filter(session=session, status=Run.Status.COMPLETED).count() == 2
        stored = page.evaluate("() => Object.entries(sessionStorage)")
        assert [value for name, value in stored if name.startswith("kagent:session:")] == [session.pk]

        # Keyboard: on a desktop the chat sits beside the page (not modal); Escape closes and gives focus back to the
        # launcher; Enter on it opens again.
        expect(page.get_by_role("dialog")).to_have_attribute("aria-modal", "false")
        page.keyboard.press("Escape")
        expect(page.get_by_role("dialog")).to_be_hidden()
        launcher = page.get_by_role("button", name="Chat with us")
        expect(launcher).to_be_focused()
        expect(launcher).to_have_attribute("aria-expanded", "false")
        page.keyboard.press("Enter")
        expect(page.get_by_label("Message")).to_be_focused()

        # A reload (or another page of the shop) picks the conversation up again, handed off as it is.
        page.reload()
        page.get_by_role("button", name="Chat with us").click()
        expect(log.locator(".message")).to_have_count(4)
        expect(log.locator(".message.assistant").last).to_contain_text("a person will continue here")
        expect(log.locator(".notice.handoff")).to_contain_text("A person from the team will continue")

        # Too many messages: the API's 429 is said kindly, with its wait, and the message is kept to send again. (The
        # team holds the conversation: the message is for them, limited like runs.)
        def too_many(key: ApiKey, *, address: str) -> None:
            raise throttle.RateLimited("This key wrote more than 60 messages this minute.", 17)

        monkeypatch.setattr(throttle, "customer_message", too_many)  # the fault: the limit reached
        send(page, "Are you still there?")
        expect(page.get_by_role("alert")).to_have_text(
            "You're sending messages faster than we can answer. Please wait 17 seconds and try again."
        )
        expect(page.get_by_label("Message")).to_have_value("Are you still there?")
        expect(log.locator(".message.user")).to_have_count(2)
        assert Run.objects.filter(session=session).count() == 2
        assert not Message.objects.filter(session=session, content="Are you still there?").exists()
        assert page.js_errors == []
    finally:
        page.context.close()


def test_on_a_phone_the_chat_takes_the_whole_screen(alice, live_server, browser, shop, start_worker, fake_llm):
    script_conversation(fake_llm, "widget-phone")
    agent = publish_agent(alice, fake_llm, "widget-phone")
    allow(alice, shop.origin)
    start_worker(fake_llm.worker_env())
    url = widget_page(alice, live_server, shop, agent)

    page = new_page(browser, live_server, **PHONE)
    try:
        log = converse(page, url)
        receipts_shown(log, alice, ticket_made=False)  # anonymous: the model's create_ticket was refused
        box = page.get_by_role("dialog").bounding_box()
        assert box == {"x": 0, "y": 0, "width": 390, "height": 844}
        no_sideways_scroll(page)
        for control in (page.get_by_role("button", name="Send"), page.get_by_role("button", name="Close chat")):
            size = control.bounding_box()
            assert size["width"] >= 44 and size["height"] >= 44  # big enough for a finger
        screenshot(page, "widget-phone", full_page=False)
        # Covering the page, the chat is a modal dialog: Tab goes round inside it.
        expect(page.get_by_role("dialog")).to_have_attribute("aria-modal", "true")
        expect(page.get_by_label("Message")).to_be_focused()
        page.keyboard.press("Tab")
        expect(page.get_by_role("button", name="Send")).to_be_focused()
        page.keyboard.press("Tab")
        expect(page.get_by_role("button", name="Close chat")).to_be_focused()
        page.keyboard.press("Shift+Tab")
        expect(page.get_by_role("button", name="Send")).to_be_focused()
        page.get_by_role("button", name="Close chat").click()
        expect(page.get_by_role("button", name="Chat with us")).to_be_visible()
        assert page.js_errors == []
    finally:
        page.context.close()


def test_a_page_whose_origin_the_key_does_not_list_gets_nothing(alice, live_server, browser, shop, fake_llm):
    fake_llm.script("widget-refused", [text("never")])
    agent = publish_agent(alice, fake_llm, "widget-refused")
    allow(alice, "https://shop.example")  # not this page's origin
    url = widget_page(alice, live_server, shop, agent)
    page = new_page(browser, live_server, **DESKTOP)
    refused: list[str] = []
    page.on("requestfailed", lambda request: refused.append(request.url))
    try:
        page.goto(url)
        page.get_by_role("button", name="Chat with us").click()
        send(page, "Hello?")
        expect(page.get_by_role("alert")).to_have_text(
            "We can't reach the chat right now. Check your connection and try again."
        )
        expect(page.get_by_label("Message")).to_have_value("Hello?")  # kept, to send again
        # The browser stopped both at the preflight: the greeting asked for on opening, and the conversation.
        assert refused == [f"{live_server.url}/v1/agents/{agent}/greeting", f"{live_server.url}/v1/sessions"]
        assert not Session.objects.exists()
        assert page.js_errors == []
    finally:
        page.context.close()


def test_the_api_keys_page_sets_a_keys_allowed_origins_with_errors_next_to_the_field(alice, page):
    key = ApiKey.objects.get(project=alice.project, kind=ApiKey.Kind.PUBLISHABLE)
    sign_in(page, alice)
    page.goto("/settings/api-keys/")
    form = page.locator(f"#origins-{key.pk}")
    field = form.get_by_label("Allowed origins")
    field.fill("https://shop.example\nhttps://shop.example/checkout")
    form.get_by_role("button", name="Save origins").click()
    field = page.locator(f"#origins-{key.pk}").get_by_label("Allowed origins")
    expect(field).to_have_attribute("aria-invalid", "true")
    error_id = field.get_attribute("aria-describedby")
    expect(page.locator(f"#{error_id}")).to_have_text(
        "https://shop.example/checkout: an origin has no path, query or fragment: https://shop.example."
    )
    expect(field).to_have_value("https://shop.example\nhttps://shop.example/checkout")  # as typed, to fix
    key.refresh_from_db()
    assert key.allowed_origins == []

    field.fill("https://shop.example\nHTTP://LOCALHOST:3000")
    page.locator(f"#origins-{key.pk}").get_by_role("button", name="Save origins").click()
    expect(page.locator(".messages")).to_contain_text("https://shop.example, http://localhost:3000")
    expect(page.locator(f"#origins-{key.pk}").get_by_label("Allowed origins")).to_have_value(
        "https://shop.example\nhttp://localhost:3000"
    )
    key.refresh_from_db()
    assert key.allowed_origins == ["https://shop.example", "http://localhost:3000"]
    assert re.search(r"/settings/api-keys/$", page.url)


def test_a_stream_that_ends_before_the_run_does_is_resumed_where_it_stopped(
    alice, live_server, browser, shop, start_worker, fake_llm, monkeypatch
):
    # The server ends every event stream as soon as it has sent what there is (as a proxy's or the WSGI server's
    # time limit does, sooner): the widget reads on with Last-Event-ID, missing nothing and showing nothing twice.
    monkeypatch.setattr(streams, "MAX_WSGI_STREAM_S", 0.0)
    slow = [Fault(delay_s=0.5)]
    fake_llm.script(
        "widget-resume",
        [calls(HANDOFF, faults=slow), text("Someone from our team will take over here.", faults=slow)],
    )
    agent = publish_agent(alice, fake_llm, "widget-resume")
    allow(alice, shop.origin)
    start_worker(fake_llm.worker_env())
    page = new_page(browser, live_server, **DESKTOP)
    followed: list[str | None] = []
    page.on(
        "request",
        lambda request: (
            followed.append(request.headers.get("last-event-id"))
            if "/v1/runs/" in request.url and request.url.endswith("/events") and request.method == "GET"
            else None
        ),
    )
    try:
        page.goto(widget_page(alice, live_server, shop, agent))
        page.get_by_role("button", name="Chat with us").click()
        send(page, "The parcel arrived broken")
        log = page.get_by_role("log", name="Conversation")
        answer = "Assistant said:Someone from our team will take over here."
        expect(log.locator(".message.assistant")).to_have_text([answer], timeout=LIVE)
        expect(log.locator(".notice.handoff")).to_have_count(1)
        assert len(followed) >= 2, followed
        assert followed[0] is None
        resumed = [int(value) for value in followed[1:] if value is not None]
        assert resumed and resumed == sorted(resumed), followed
        assert page.js_errors == []
    finally:
        page.context.close()


def test_the_api_keys_page_with_its_origins_fits_a_phone(alice, phone_page):
    key = ApiKey.objects.get(project=alice.project, kind=ApiKey.Kind.PUBLISHABLE)
    api_key_origins_update(
        project=alice.project,
        key_id=key.pk,
        allowed_origins=["https://a-rather-long-shop-name.example", "http://localhost:3000"],
    )
    sign_in(phone_page, alice)
    phone_page.goto("/settings/api-keys/")
    expect(phone_page.locator(f"#origins-{key.pk}").get_by_label("Allowed origins")).to_be_visible()
    no_sideways_scroll(phone_page)
    screenshot(phone_page, "phone-api-keys-origins")


def test_a_page_answers_the_agents_client_tool_through_kagent_init(
    alice, live_server, browser, shop, start_worker, fake_llm
):
    fake_llm.script("widget-cart", [calls(("get_cart", {})), text("You have 2 items in your cart.")])
    config = {
        "model": {"provider": "openai_compatible", "name": "script:widget-cart"},
        "tools": {"client": [{"name": "get_cart", "description": "The items in the cart.", "effect": "read"}]},
    }
    api = alice.client()
    agent = api.post("/v1/agents", {"name": "Cart", "config": config}, format="json").json()["id"]
    assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
    allow(alice, shop.origin)
    start_worker(fake_llm.worker_env())
    options = {"key": alice.publishable_key, "agent": agent, "title": "Acme Shoes support"}
    init = (
        "<script>KAgent.init(Object.assign(" + json.dumps(options) + ", {clientTools: {get_cart: function () {"
        " return new Promise(function (done) { done({items: 2, skus: ['BOOT-41', 'SOCK-3']}); }); }}}));</script>"
    )
    url = shop.page("/cart", {"src": f"{live_server.url}/widget.js"}, then=init, load="")
    page = new_page(browser, live_server, **DESKTOP)
    try:
        page.goto(url)
        page.get_by_role("button", name="Chat with us").click()
        send(page, "What is in my cart?")
        log = page.get_by_role("log", name="Conversation")
        answer = "Assistant said:You have 2 items in your cart."
        expect(log.locator(".message.assistant")).to_have_text([answer], timeout=LIVE)
        run = Run.objects.get(project=alice.project)
        assert run.status == Run.Status.COMPLETED
        [call] = ToolCall.objects.filter(run=run)
        assert call.name == "get_cart" and call.status == ToolCall.Status.SUCCEEDED
        assert "BOOT-41" in json.dumps(call.result)  # what the page's function returned
        assert page.js_errors == []
    finally:
        page.context.close()


def test_an_answer_claiming_a_ticket_no_tool_made_never_reaches_the_customer(
    alice, live_server, browser, shop, start_worker, fake_llm
):
    # The model insists on a ticket it never opened: the guard pushes back twice, then keeps the claim unverified.
    claims = [text("I've opened ticket TKT-99 for you."), text("Your ticket TKT-99 is open."), text("TKT-99 is open.")]
    fake_llm.script("widget-liar", claims)
    agent = publish_agent(alice, fake_llm, "widget-liar")
    allow(alice, shop.origin)
    start_worker(fake_llm.worker_env())
    page = new_page(browser, live_server, **DESKTOP)
    try:
        page.goto(widget_page(alice, live_server, shop, agent))
        page.get_by_role("button", name="Chat with us").click()
        send(page, "Open a ticket for my boots")
        log = page.get_by_role("log", name="Conversation")
        expect(log.locator(".message.assistant")).to_have_count(1, timeout=LIVE)
        run = Run.objects.get(project=alice.project)
        assert run.output["unverified_claims"] == ["ticket TKT-99"]
        assert "TKT-99" not in log.inner_text()
        expect(log.locator(".message.assistant")).to_contain_text("couldn't confirm")
        assert Ticket.objects.count() == 0
        # Nor later: a reload shows the conversation as stored, and that answer as it was shown.
        page.reload()
        page.get_by_role("button", name="Chat with us").click()
        expect(log.locator(".message")).to_have_count(2, timeout=LIVE)
        expect(log.locator(".message.assistant")).to_contain_text("couldn't confirm")
        assert "TKT-99" not in log.inner_text()
        assert page.js_errors == []
    finally:
        page.context.close()


def test_the_customer_reads_the_answer_as_it_is_written(
    alice, live_server, browser, shop, start_worker, fake_llm, monkeypatch
):
    # A model writing a word every 150 ms: the first sentence is on the customer's screen, checked, while the model
    # is still writing the rest, and the reply ends as the run's own text, in one message.
    answer = (
        "Thanks for waiting. Your boots ship on Monday from our warehouse in Leeds. They should arrive by Thursday."
    )
    fake_llm.script("widget-writing", [text(answer)])
    monkeypatch.setattr(fake_llm, "chunk_delay_s", 0.15)
    agent = publish_agent(alice, fake_llm, "widget-writing")
    allow(alice, shop.origin)
    start_worker(fake_llm.worker_env())
    page = new_page(browser, live_server, **DESKTOP)
    try:
        page.goto(widget_page(alice, live_server, shop, agent))
        page.get_by_role("button", name="Chat with us").click()
        send(page, "Where are my boots?")
        log = page.get_by_role("log", name="Conversation")
        expect(log.locator(".message.assistant.writing")).to_contain_text("Thanks for waiting.", timeout=LIVE)
        assert Run.objects.get(project=alice.project).status != Run.Status.COMPLETED  # the model is still writing
        assert "Leeds" not in log.inner_text() or "Thursday" not in log.inner_text()
        expect(log.locator(".message.assistant")).to_have_text(f"Assistant said:{answer}", timeout=LIVE)
        expect(log.locator(".message.assistant.writing")).to_have_count(0)
        assert Run.objects.get(project=alice.project).output["text"] == answer
        assert page.js_errors == []
    finally:
        page.context.close()


# --- the live handoff ---------------------------------------------------------------------------------------------

TEAM_ANSWERS = "A person from the team will answer here."
PHONE_375: dict[str, Any] = {
    "viewport": {"width": 375, "height": 667},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}
# What of the widget is wider than it may be: an element wider than its box (it would scroll sideways), or past the
# right edge of the screen (the texts for screen readers only are clipped to a pixel on purpose).
TOO_WIDE = """() => [...document.querySelector('[data-kagent-widget]').shadowRoot.querySelectorAll('*')]
    .filter(n => n.clientWidth && !n.classList.contains('visually-hidden'))
    .filter(n => n.scrollWidth > n.clientWidth + 1 || n.getBoundingClientRect().right > innerWidth + 1)
    .map(n => n.className || n.tagName)"""


def team_writes(tenant: Tenant, session_id: str, content: str, author: str = "Maya") -> None:
    """A person of the business answers through the API, as a helpdesk relay or the desk does."""
    body = {"role": "team", "content": content, "author": author}
    response = tenant.client().post(f"/v1/sessions/{session_id}/messages", body, format="json")
    assert response.status_code == 201, response.json()


def thread(tenant: Tenant, session_id: str) -> list[tuple[str, str, str | None, bool]]:
    """The conversation as the API holds it, oldest first: (role, content, author, written by a run)."""
    response = tenant.client().get(f"/v1/sessions/{session_id}/messages?limit=100")
    assert response.status_code == 200, response.json()
    return [(m["role"], m["content"], m["author"], m["run"] is not None) for m in reversed(response.json()["data"])]


def runs_of(tenant: Tenant, session_id: str) -> int:
    response = tenant.client().get(f"/v1/runs?session={session_id}&limit=100")
    assert response.status_code == 200, response.json()
    return len(response.json()["data"])


def classes(log: Any) -> list[str]:
    return list(log.locator(".message, .notice").evaluate_all("nodes => nodes.map(n => n.className)"))


def test_the_team_answers_live_in_the_widget_and_hands_the_customer_back_to_the_agent(
    alice, live_server, browser, shop, start_worker, fake_llm
):
    fake_llm.script("widget-live", [calls(HANDOFF), text("A person from our team will continue here.")])
    agent = publish_agent(alice, fake_llm, "widget-live")
    allow(alice, shop.origin)
    start_worker(fake_llm.worker_env())
    token = end_user_token(alice, "cust-7")  # a verified customer: its token goes with every call of the widget
    url = widget_page(alice, live_server, shop, agent, **{"data-end-user-token": token})
    page = new_page(browser, live_server, **DESKTOP)
    followed: list[str | None] = []  # the Last-Event-ID of each request for the conversation's events
    page.on(
        "request",
        lambda request: (
            followed.append(request.headers.get("last-event-id"))
            if "/v1/sessions/" in request.url and request.url.endswith("/events")
            else None
        ),
    )
    first = "My boots arrived with a torn sole. I want to talk to a person."
    maya = "Hi, I'm Maya from Acme. I'm sorry about the sole: I'll sort this out for you."
    try:
        page.goto(url)
        page.get_by_role("button", name="Chat with us").click()
        log = page.get_by_role("log", name="Conversation")
        status = page.get_by_role("status")
        send(page, first)
        expect(log.locator(".message.assistant")).to_have_text(
            ["Assistant said:A person from our team will continue here."], timeout=LIVE
        )
        expect(log.locator(".notice.handoff")).to_have_count(1)  # the receipt and session.updated: said once
        expect(status).to_have_text(TEAM_ANSWERS)
        session = Session.objects.get(project=alice.project)
        assert session.status == Session.Status.HANDED_OFF

        # The team answers through the API: in the thread as it is written, signed, apart from the agent's answers.
        team_writes(alice, session.pk, maya)
        reply = log.locator(".message.team")
        expect(reply).to_have_count(1)
        expect(reply.locator(".author")).to_have_text("Maya · Team")
        expect(reply.locator("p")).to_have_text(maya)
        expect(reply.locator(".visually-hidden")).to_have_text("Maya from the team said:")
        backgrounds = [
            log.locator(f".message.{who} p").first.evaluate("node => getComputedStyle(node).backgroundColor")
            for who in ("assistant", "team")
        ]
        assert backgrounds[0] != backgrounds[1], backgrounds
        screenshot(page, "widget-team-reply", full_page=False)

        # The customer's answer is for the team: a message in the conversation, no run, no "replying".
        send(page, "Thank you! It's order 8812.")
        expect(log.locator(".message.user")).to_have_count(2)
        wait_for(lambda: len(thread(alice, session.pk)) == 4, timeout=10, message="the message to the team")
        assert thread(alice, session.pk) == [
            ("user", first, None, True),
            ("assistant", "A person from our team will continue here.", None, True),
            ("team", maya, "Maya", False),
            ("user", "Thank you! It's order 8812.", None, False),
        ]
        assert runs_of(alice, session.pk) == 1
        expect(status).to_have_text(TEAM_ANSWERS)
        expect(page.get_by_role("button", name="Send")).to_be_enabled()
        expect(page.get_by_label("Message")).to_have_value("")
        expect(page.get_by_role("alert")).to_have_text("")

        # Handed back to the agent: the next message starts a run, and the agent answers. (The scripted model
        # answers by the number of answers in the history: the next run asks for its second turn again.)
        fake_llm.script("widget-live", [calls(HANDOFF), text("Welcome back! Is there anything else I can do?")])
        response = alice.client().patch(f"/v1/sessions/{session.pk}", {"status": "open"}, format="json")
        assert response.status_code == 200, response.json()
        expect(log.locator(".notice.info")).to_have_text(
            ["You're back with our assistant. It will answer your next message."]
        )
        expect(status).to_have_text("")
        send(page, "No, that's all. Thanks!")
        expect(log.locator(".message.assistant").nth(1)).to_have_text(
            "Assistant said:Welcome back! Is there anything else I can do?", timeout=LIVE
        )
        assert runs_of(alice, session.pk) == 2
        assert page.js_errors == []

        # A reload keeps the whole thread, the team's messages as they were shown, and follows the conversation on
        # from the last event it read.
        requests_before = len(followed)
        page.reload()
        page.get_by_role("button", name="Chat with us").click()
        expect(log.locator(".message")).to_have_count(6, timeout=LIVE)
        assert classes(log) == [
            "message user",
            "message assistant",
            "message team",
            "message user",
            "message user",
            "message assistant",
        ]
        expect(log.locator(".message.team .author")).to_have_text("Maya · Team")
        expect(log.locator(".message.team p")).to_have_text(maya)
        expect(log.locator(".message.user").nth(1)).to_have_text("You said:Thank you! It's order 8812.")
        wait_for(lambda: len(followed) > requests_before, timeout=10, message="the conversation followed again")
        resumed = followed[requests_before]
        assert resumed is not None and int(resumed) > 0, followed

        # Still live: the team writes again (taking the conversation again), once, and the customer sees it.
        team_writes(alice, session.pk, "One more thing: your replacement pair ships on Monday.")
        expect(log.locator(".message.team")).to_have_count(2)
        expect(log.locator(".message.team").nth(1).locator("p")).to_have_text(
            "One more thing: your replacement pair ships on Monday."
        )
        expect(log.locator(".notice.handoff")).to_have_text(
            ["You're being transferred to a person from the team. They'll continue here."]
        )
        expect(status).to_have_text(TEAM_ANSWERS)
        expect(log.locator(".message")).to_have_count(7)
        screenshot(page, "widget-team-after-reload", full_page=False)
        assert page.js_errors == []
    finally:
        page.context.close()


def test_a_message_to_a_conversation_the_team_took_meanwhile_goes_to_the_team(
    alice, live_server, browser, shop, start_worker, fake_llm
):
    # The conversation's events don't reach this page (a proxy in the way): the team took the conversation without
    # the widget hearing of it, and the API's 409 session_handed_off tells it when the customer writes.
    fake_llm.script("widget-taken", [text("Hello! How can I help?")])
    agent = publish_agent(alice, fake_llm, "widget-taken")
    allow(alice, shop.origin)
    start_worker(fake_llm.worker_env())
    page = new_page(browser, live_server, **DESKTOP)
    page.route(re.compile(r".*/v1/sessions/[^/]+/events$"), lambda route: route.abort())
    try:
        page.goto(widget_page(alice, live_server, shop, agent))
        page.get_by_role("button", name="Chat with us").click()
        log = page.get_by_role("log", name="Conversation")
        send(page, "Hello")
        expect(log.locator(".message.assistant")).to_have_text(["Assistant said:Hello! How can I help?"], timeout=LIVE)
        session = Session.objects.get(project=alice.project)
        team_writes(alice, session.pk, "Hi, Maya here: I saw your order has a problem.")

        send(page, "Is anyone there?")
        expect(log.locator(".notice.handoff")).to_have_text(
            ["You're being transferred to a person from the team. They'll continue here."]
        )
        expect(page.get_by_role("status")).to_have_text(TEAM_ANSWERS)
        wait_for(lambda: len(thread(alice, session.pk)) == 4, timeout=10, message="the message to the team")
        assert thread(alice, session.pk)[-1] == ("user", "Is anyone there?", None, False)
        assert runs_of(alice, session.pk) == 1
        expect(log.locator(".message.user")).to_have_text(["You said:Hello", "You said:Is anyone there?"])
        expect(page.get_by_role("alert")).to_have_text("")
        assert page.js_errors == []
    finally:
        page.context.close()


def test_at_a_phones_375px_the_teams_replies_fit_and_a_reply_to_a_closed_chat_shows_on_the_launcher(
    alice, live_server, browser, shop, start_worker, fake_llm
):
    fake_llm.script("widget-375", [calls(HANDOFF), text("A person from our team will continue here.")])
    agent = publish_agent(alice, fake_llm, "widget-375")
    allow(alice, shop.origin)
    start_worker(fake_llm.worker_env())
    page = new_page(browser, live_server, **PHONE_375)
    try:
        page.goto(widget_page(alice, live_server, shop, agent))
        page.get_by_role("button", name="Chat with us").click()
        log = page.get_by_role("log", name="Conversation")
        send(page, "Can I talk to a person about a return?")
        expect(log.locator(".message.assistant")).to_have_count(1, timeout=LIVE)
        session = Session.objects.get(project=alice.project)
        long_link = "https://acme.example/returns/label?order=8812&size=42&colour=chestnut-brown&carrier=parcelforce"
        team_writes(alice, session.pk, f"Hello! Here is your return label: {long_link}", "Maya Fernández-Okonkwo")
        expect(log.locator(".message.team .author")).to_have_text("Maya Fernández-Okonkwo · Team")
        send(page, "Got it, thank you")
        expect(log.locator(".message.user")).to_have_count(2)
        wait_for(lambda: len(thread(alice, session.pk)) == 4, timeout=10, message="the message to the team")
        assert runs_of(alice, session.pk) == 1
        assert page.get_by_role("dialog").bounding_box() == {"x": 0, "y": 0, "width": 375, "height": 667}
        no_sideways_scroll(page)
        assert page.evaluate(TOO_WIDE) == []
        screenshot(page, "widget-phone-375-team", full_page=False)

        # The chat closed, the team answers: the launcher says so; opening the chat shows the reply.
        page.get_by_role("button", name="Close chat").click()
        team_writes(alice, session.pk, "The courier collects it tomorrow between 9 and 12.")
        launcher = page.get_by_role("button", name="Chat with us")
        expect(launcher.locator(".badge")).to_have_text("New reply")
        expect(launcher.locator(".badge")).to_be_visible()
        no_sideways_scroll(page)
        screenshot(page, "widget-phone-375-new-reply", full_page=False)
        launcher.click()
        expect(log.locator(".message.team")).to_have_count(2)
        expect(log.locator(".message.team").last.locator("p")).to_have_text(
            "The courier collects it tomorrow between 9 and 12."
        )
        page.get_by_role("button", name="Close chat").click()
        expect(page.get_by_role("button", name="Chat with us").locator(".badge")).to_be_hidden()

        # Waiting for the team, the customer goes on to another page of the shop, the chat closed: the reply shows
        # on the launcher there too.
        page.reload()
        expect(page.get_by_role("button", name="Chat with us")).to_be_visible()
        team_writes(alice, session.pk, "Anything else I can help with?")
        expect(page.get_by_role("button", name="Chat with us").locator(".badge")).to_be_visible()
        page.get_by_role("button", name="Chat with us").click()
        expect(log.locator(".message.team")).to_have_count(3)
        expect(log.locator(".message.team").last.locator("p")).to_have_text("Anything else I can help with?")
        expect(log.locator(".message")).to_have_count(6)
        assert page.js_errors == []
    finally:
        page.context.close()


GREETING = "Hi! I'm the Acme Shoes assistant. Ask me about an order, a return or a size."


def test_the_chat_opens_on_the_businesss_greeting_and_it_changes_only_with_a_publish(
    alice, live_server, browser, shop, start_worker, fake_llm
):
    fake_llm.script("widget-greeting", [text("Order 8812 left our warehouse yesterday.")])
    agent = publish_agent(alice, fake_llm, "widget-greeting", greeting=GREETING)
    allow(alice, shop.origin)
    start_worker(fake_llm.worker_env())
    url = widget_page(alice, live_server, shop, agent)

    page = new_page(browser, live_server, **DESKTOP)
    try:
        page.goto(url)
        page.get_by_role("button", name="Chat with us").click()
        log = page.get_by_role("log", name="Conversation")
        expect(log.locator(".message.assistant.greeting")).to_have_text("Assistant said:" + GREETING)
        screenshot(page, "widget-greeting-desktop", full_page=False)
        send(page, "Where is order 8812?")
        expect(log.locator(".message.assistant").nth(1)).to_contain_text("left our warehouse", timeout=LIVE)
        order = log.locator(".message").evaluate_all("nodes => nodes.map(n => n.className)")
        assert order == ["message assistant greeting", "message user", "message assistant"]
        # The business's words for the customer, not part of what the model is told or said.
        request = fake_llm.last_request("widget-greeting")
        assert GREETING not in json.dumps(request.body)
        assert [m["role"] for m in request.messages if m["role"] != "system"] == ["user"]

        # A reload keeps the greeting first, before the conversation it restores.
        page.reload()
        page.get_by_role("button", name="Chat with us").click()
        expect(log.locator(".message")).to_have_count(3)
        order = log.locator(".message").evaluate_all("nodes => nodes.map(n => n.className)")
        assert order == ["message assistant greeting", "message user", "message assistant"]
        assert page.js_errors == []
    finally:
        page.context.close()

    # A new greeting in the draft reaches customers only when it is published.
    api = alice.client()
    new_words = "Welcome back to Acme Shoes! How can I help?"
    assert api.patch(f"/v1/agents/{agent}", {"config": {"greeting": new_words}}, format="json").status_code == 200
    phone = new_page(browser, live_server, **PHONE)
    try:
        phone.goto(url)
        phone.get_by_role("button", name="Chat with us").click()
        greeting = phone.get_by_role("log", name="Conversation").locator(".greeting")
        expect(greeting).to_contain_text(GREETING)
        assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
        phone.reload()
        phone.get_by_role("button", name="Chat with us").click()
        expect(greeting).to_contain_text(new_words)
        no_sideways_scroll(phone)
        screenshot(phone, "widget-greeting-phone", full_page=False)
        assert phone.js_errors == []
    finally:
        phone.context.close()
