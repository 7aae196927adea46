"""MCP servers in the dashboard, in a real Chromium (SPEC §8, issue 28): a business adds its MCP server under Tools
(its tools listed through the protected client before anything is saved), sees which tools can't be granted and why,
grants one in the agent's editor with its effect, publishes, and can't delete a server a draft still uses; on a
phone's width too. Screenshots under var/screenshots/ (mcp-*)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Agent, AgentVersion
from kagent.models import SigningSecret
from kagent.secrets import signing_secrets_valid
from tests.conftest import Tenant
from tests.dashboard.conftest import screenshot
from tests.dashboard.test_browser import every_control_named, nav, no_sideways_scroll, sign_in
from tools.models import McpServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCHEMA = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}


@pytest.fixture
def shop_server(alice: Tenant, upstream: Any, egress_settings: Any) -> str:
    """The business's MCP server on loopback TLS, checking alice's signatures; its URL."""
    upstream.secrets = signing_secrets_valid(project=alice.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    path = upstream.mcp.serve(
        "shop",
        tools=[
            {"name": "order_status", "description": "Look up an order by its number.", "inputSchema": SCHEMA},
            {"name": "cancel_order", "description": "Cancel an order.", "inputSchema": SCHEMA},
            {"name": "Bad Name!", "description": "Named against the rules.", "inputSchema": SCHEMA},
        ],
    )
    return f"https://tools.test:8443{path}"


def test_a_business_adds_its_mcp_server_and_grants_a_tool(alice, shop_server, live_server, page):
    agent = Agent.objects.create(project=alice.project, name="Support", config={})
    sign_in(page, alice)
    nav(page, "Tools")
    expect(page.locator("#mcp-servers")).to_contain_text("MCP servers")
    page.get_by_role("link", name="Add MCP server").click()
    page.wait_for_url(re.compile(r"/tools/mcp/new/$"))
    every_control_named(page)

    # A refused address first: nothing saved, the reason in plain words, no address shown.
    page.get_by_label("Name").fill("shop")
    page.get_by_label("URL").fill("https://internal.test:8443/mcp/shop")
    page.get_by_role("button", name="Add and list its tools").click()
    expect(page.locator("#form-problems")).to_contain_text("could not be listed")
    assert "127.0.0.1" not in page.content()
    assert not McpServer.objects.exists()

    page.get_by_label("URL").fill(shop_server)
    page.get_by_role("button", name="Add and list its tools").click()
    page.wait_for_url(re.compile(r"/tools/mcp/mcp_[0-9a-z]+/$"))
    table = page.locator("#mcp-tools-table")
    expect(table.locator("tbody tr")).to_have_count(3)
    expect(table.locator("tr", has_text="order_status")).to_contain_text("shop__order_status")
    expect(table.locator("tr", has_text="Bad Name!")).to_contain_text("doesn't fit the tool-name rules")
    no_sideways_scroll(page)
    screenshot(page, "mcp-server-desktop")

    # Granted in the agent's editor, as a read, with rules.
    page.goto(f"/agents/{agent.pk}/")
    page.locator("#mcp-grants-shop summary").click()
    grant = page.locator("#grant-mcp-shop__order_status")
    grant.get_by_label("Use shop__order_status").check()
    grant.get_by_label("Effect").select_option("read")
    grant.get_by_label("Rules").fill("Only for the customer's own orders.")
    expect(page.locator('[id="grant-mcp-shop__Bad Name!"] input')).to_have_count(0)  # shown, not grantable
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messages, [role=status]").first).to_contain_text("Saved")
    agent.refresh_from_db()
    assert agent.config["tools"]["mcp"] == [
        {
            "server": "shop",
            "tool": "order_status",
            "enabled": True,
            "effect": "read",
            "requires_verified_user": False,
            "rules": "Only for the customer's own orders.",
        }
    ]
    expect(page.locator("#mcp-grants-shop")).to_have_attribute("open", "")

    # Published: the version holds its own copy.
    page.get_by_role("button", name="Publish").first.click()
    page.wait_for_url(re.compile(rf"/agents/{agent.pk}/versions/$"))
    version = AgentVersion.objects.get(agent=agent)
    assert version.mcp_tools["shop__order_status"]["url"] == shop_server

    # A server a draft grants can't be deleted: the page says which agent.
    page.goto("/tools/")
    page.get_by_role("link", name="shop").click()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    expect(page.locator("body")).to_contain_text("Support")
    assert McpServer.objects.filter(name="shop").exists()


def test_the_mcp_pages_fit_a_phone(alice, shop_server, live_server, phone_page):
    server_row = McpServer.objects.create(
        project=alice.project,
        name="shop",
        url=shop_server,
        tools=[
            {
                "name": "order_status_with_a_rather_long_name_for_a_phone",
                "description": "Look up an order by its number. " * 10,
                "input_schema": SCHEMA,
                "grantable": True,
                "reason": None,
            }
        ],
    )
    sign_in(phone_page, alice)
    phone_page.goto(f"/tools/mcp/{server_row.pk}/")
    expect(phone_page.locator("#mcp-tools-table")).to_be_visible()
    no_sideways_scroll(phone_page)
    screenshot(phone_page, "mcp-server-phone")
    phone_page.goto("/tools/")
    expect(phone_page.locator("#mcp-servers-table")).to_contain_text("shop")
    no_sideways_scroll(phone_page)
    screenshot(phone_page, "mcp-tools-phone")
