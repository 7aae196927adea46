"""The dashboard's pages through Django's test client: they call the API's services, so they refuse what the API
refuses with its message next to the field; what each role may change; and another organization's objects are a
404 on every page and every htmx endpoint."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core import mail
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from agents.models import Agent, KnowledgeSource
from agents.services import agent_create, agent_publish, knowledge_source_create
from checks.models import Check
from conversations.models import Message, Session
from conversations.services import panel_session_create
from dashboard import urls as dashboard_urls
from desk.models import Handoff, Ticket
from fakes.llm import calls, text
from hooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent
from hooks.services import endpoint_create
from kagent.invitations import invitation_send
from kagent.models import EgressEvent, Invitation, Membership, Secret, User
from kagent.secrets import secret_put
from runs import engine
from runs.models import Run
from runs.services import run_create
from tests.conftest import Tenant
from tools.models import HttpTool, McpServer
from tools.services import http_tool_create

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
TOKEN = "orders-token-0123456789-SECRET"


def signed_in(tenant: Tenant | User) -> Client:
    user = tenant.user if isinstance(tenant, Tenant) else tenant
    client = Client()
    client.force_login(user)
    return client


def member_of(tenant: Tenant, role: str, email: str) -> Client:
    user = User.objects.create_user(email, PASSWORD)
    Membership.objects.create(organization=tenant.organization, user=user, role=role)
    return signed_in(user)


def order_tool(tenant: Tenant, **config: Any) -> HttpTool:
    return http_tool_create(
        project=tenant.project,
        name="order_status",
        description="Look up an order.",
        effect="read",
        config={
            "method": "GET",
            "url": "https://api.example.com/orders/{{args.order_number}}",
            "headers": {"Authorization": "Bearer {{secret.ORDERS_TOKEN}}"},
            "parameters": {
                "type": "object",
                "properties": {"order_number": {"type": "string"}},
                "required": ["order_number"],
            },
            **config,
        },
    )


def editor_post(agent: Agent, **changes: Any) -> dict[str, Any]:
    """The editor form as the page renders it for `agent`, with `changes`."""
    from dashboard.editor import values_from_config

    values = values_from_config(
        name=agent.name, description=agent.description, config=agent.config, tools=list(HttpTool.objects.all())
    )
    form: dict[str, Any] = {
        "$.name": values.name,
        "$.description": values.description,
        "$.instructions": values.instructions,
        "$.greeting": values.greeting,
        "$.model.provider": values.model["provider"],
        "$.tools.max_tool_rounds": values.max_tool_rounds,
        "$.variables.name": [n for n, _ in values.variables],
        "$.variables.value": [v for _, v in values.variables],
    }
    if values.tools_enabled:
        form["$.tools.enabled"] = "on"
    for grant in values.builtins:
        if grant.enabled:
            form[f"{grant.path}.enabled"] = "on"
        form[f"{grant.path}.rules"] = grant.rules
        if grant.approval == "ask" and grant.tool.effect == "action":
            form[f"{grant.path}.approval"] = "ask"
    for grant in values.http:
        if grant.used:
            form[f"{grant.path}.used"] = "on"
        form[f"{grant.path}.rules"] = grant.rules
        if grant.approval == "ask" and grant.effect == "action":
            form[f"{grant.path}.approval"] = "ask"
    form.update(changes)
    return form


def errors_on(body: str) -> dict[str, str]:
    """{field id: its error message} from a page."""
    return dict(re.findall(r'<p class="field-error" id="([^"]+)-error">([^<]*)</p>', body))


# --- the agent editor ---------------------------------------------------------------------------------------------


def test_new_agent_then_the_editor_saves_the_whole_draft(alice):
    client = signed_in(alice)
    response = client.post("/agents/new/", {"$.name": "Front desk", "$.instructions": "Be kind.\r\nBe brief."})
    assert response.status_code == 302
    agent = Agent.objects.get(project=alice.project)
    assert response["Location"] == f"/agents/{agent.pk}/"
    assert agent.config["instructions"] == "Be kind.\nBe brief."  # a textarea's CRLF is the line the person typed

    assert client.get(f"/agents/{agent.pk}/").status_code == 200
    form = editor_post(
        agent,
        **{
            "$.model.provider": "demo",
            "$.variables.name": ["shop", ""],
            "$.variables.value": ["Acme", ""],
            "$.tools.builtin.create_ticket.enabled": "on",
            "$.tools.builtin.create_ticket.rules": "Only for damage.",
            "$.tools.client.name": ["get_cart"],
            "$.tools.client.description": ["The cart."],
            "$.tools.client.parameters": [""],
            "$.tools.client.effect": ["read"],
            "$.tools.client.rules": [""],
            "$.business_hours.on": "on",
            "$.business_hours.timezone": "Asia/Riyadh",
            "$.business_hours.weekly.day": ["sun", "mon"],
            "$.business_hours.weekly.open": ["09:00", ""],
            "$.business_hours.weekly.close": ["17:00", ""],
            "$.business_hours.closed_dates": "2026-04-10\r\n2026-04-11",
        },
    )
    response = client.post(f"/agents/{agent.pk}/", form)
    assert response.status_code == 302, errors_on(response.content.decode())
    agent.refresh_from_db()
    config = agent.config
    assert config["model"] == {"provider": "demo"}
    assert config["variables"] == {"shop": "Acme"}
    assert config["tools"]["builtin"]["create_ticket"] == {"enabled": True, "rules": "Only for damage."}
    assert config["tools"]["client"] == [
        {
            "name": "get_cart",
            "description": "The cart.",
            "effect": "read",
            "rules": "",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        }
    ]
    assert config["business_hours"] == {
        "timezone": "Asia/Riyadh",
        "weekly": [{"day": "sun", "open": "09:00", "close": "17:00"}],
        "closed_dates": ["2026-04-10", "2026-04-11"],
    }
    # Saving the page unchanged changes nothing.
    before = dict(agent.config)
    page = client.get(f"/agents/{agent.pk}/").content.decode()
    assert "Acme" in page and "Only for damage." in page and "Asia/Riyadh" in page
    form = editor_post(
        agent,
        **{
            "$.tools.client.name": ["get_cart"],
            "$.tools.client.description": ["The cart."],
            "$.tools.client.parameters": [json.dumps(config["tools"]["client"][0]["parameters"])],
            "$.tools.client.effect": ["read"],
            "$.tools.client.rules": [""],
            "$.business_hours.on": "on",
            "$.business_hours.timezone": "Asia/Riyadh",
            "$.business_hours.weekly.day": ["sun"],
            "$.business_hours.weekly.open": ["09:00"],
            "$.business_hours.weekly.close": ["17:00"],
            "$.business_hours.closed_dates": "2026-04-10\n2026-04-11",
        },
    )
    assert client.post(f"/agents/{agent.pk}/", form).status_code == 302
    agent.refresh_from_db()
    assert agent.config == before


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"$.tools.max_tool_rounds": "6"}, "$.tools.max_tool_rounds", "Max tool rounds is a whole number from 1 to 5."),
        ({"$.tools.max_tool_rounds": "three"}, "$.tools.max_tool_rounds", "a whole number from 1 to 5"),
        ({"$.tools.max_tool_rounds": "²"}, "$.tools.max_tool_rounds", "a whole number from 1 to 5"),
        ({"$.tools.max_tool_rounds": "9" * 5000}, "$.tools.max_tool_rounds", "a whole number from 1 to 5"),
        ({"$.tools.max_tool_rounds": "-1"}, "$.tools.max_tool_rounds", "a whole number from 1 to 5"),
        ({"$.name": "  "}, "$.name", "Give the agent a name."),
        (
            {"$.tools.builtin.create_ticket.rules": "x" * 4001},
            "$.tools.builtin.create_ticket.rules",
            "Rules are text of at most 4000 characters.",
        ),
        (
            {"$.business_hours.on": "on", "$.business_hours.timezone": "Mars/Olympus"},
            "$.business_hours.timezone",
            "That is not a time zone we know: write one like Asia/Riyadh.",
        ),
        (
            {
                "$.business_hours.on": "on",
                "$.business_hours.timezone": "UTC",
                "$.business_hours.weekly.day": ["mon"],
                "$.business_hours.weekly.open": ["17:00"],
                "$.business_hours.weekly.close": ["09:00"],
            },
            "$.business_hours.weekly[0]",
            "Each opening period closes after it opens.",
        ),
        (
            {
                "$.tools.client.name": ["transfer_to_human"],
                "$.tools.client.description": ["x"],
                "$.tools.client.parameters": [""],
                "$.tools.client.effect": ["read"],
                "$.tools.client.rules": [""],
            },
            "$.tools.client[0].name",
            "transfer_to_human is the name of a built-in tool.",
        ),
        (
            {
                "$.tools.client.name": ["get_cart"],
                "$.tools.client.description": ["x"],
                "$.tools.client.parameters": ['{"type": "object",'],
                "$.tools.client.effect": ["read"],
                "$.tools.client.rules": [""],
            },
            "$.tools.client[0].parameters",
            "The parameters are not valid JSON",
        ),
        (
            {"$.model.provider": "openai_compatible", "$.model.base_url": "https://llm.example.com/v1"},
            "$.model.api_key_secret",
            "needs the API key secret",
        ),
        ({"$.variables.name": ["Shop Name"], "$.variables.value": ["Acme"]}, "$.variables", "A variable name starts"),
    ],
)
def test_a_config_the_api_refuses_is_refused_next_to_its_field(alice, changes, field, message):
    from dashboard.problems import field_id

    agent = agent_create(project=alice.project, name="Front desk", config={"instructions": "Be kind."})
    before = dict(agent.config)
    response = signed_in(alice).post(f"/agents/{agent.pk}/", editor_post(agent, **changes))
    assert response.status_code == 422
    body = response.content.decode()
    errors = errors_on(body)
    assert field_id(field) in errors, (errors, field)
    assert message in errors[field_id(field)]
    assert f'aria-describedby="{field_id(field)}-error' in body or f'{field_id(field)}-error"' in body
    assert 'role="alert"' in body  # and the summary at the top links to it
    agent.refresh_from_db()
    assert agent.config == before


def test_the_greeting_is_written_in_the_editor_and_shown_atop_the_test_panel(alice):
    agent = agent_create(project=alice.project, name="Front desk", config={"instructions": "Be kind."})
    client = signed_in(alice)
    words = "Hi! Ask me about <your> order."
    assert client.post(f"/agents/{agent.pk}/", editor_post(agent, **{"$.greeting": words + "\r\n"})).status_code == 302
    agent.refresh_from_db()
    assert agent.config["greeting"] == words and agent.config["instructions"] == "Be kind."
    page = client.get(f"/agents/{agent.pk}/").content.decode()
    assert "Hi! Ask me about &lt;your&gt; order." in page and 'id="panel-greeting"' in page
    refused = client.post(f"/agents/{agent.pk}/", editor_post(agent, **{"$.greeting": "x" * 501}))
    assert errors_on(refused.content.decode())["f-greeting"] == "The greeting is text of at most 500 characters."
    # Emptied, it is none: the widget shows nothing and the panel no greeting.
    assert client.post(f"/agents/{agent.pk}/", editor_post(agent, **{"$.greeting": ""})).status_code == 302
    agent.refresh_from_db()
    assert agent.config["greeting"] == ""
    assert 'id="panel-greeting"' not in client.get(f"/agents/{agent.pk}/").content.decode()


def test_the_same_message_as_the_api(alice, api):
    agent = agent_create(project=alice.project, name="Front desk")
    api_error = api.patch(f"/v1/agents/{agent.pk}", {"config": {"tools": {"max_tool_rounds": 6}}}, format="json")
    page = signed_in(alice).post(f"/agents/{agent.pk}/", editor_post(agent, **{"$.tools.max_tool_rounds": "6"}))
    assert api_error.json()["error"]["message"] in errors_on(page.content.decode()).values()


def test_http_grant_errors_land_on_the_grant_by_name(alice):
    order_tool(alice)
    agent = agent_create(project=alice.project, name="Front desk")
    form = editor_post(
        agent, **{"$.tools.http[order_status].used": "on", "$.tools.http[order_status].rules": "x" * 4001}
    )
    body = signed_in(alice).post(f"/agents/{agent.pk}/", form).content.decode()
    assert "f-tools-http-order_status-rules" in errors_on(body)


def test_starter_rules_without_javascript_fill_the_rules_and_save_nothing(alice):
    agent = agent_create(project=alice.project, name="Front desk")
    form = editor_post(agent, action="starter:create_ticket")
    response = signed_in(alice).post(f"/agents/{agent.pk}/", form)
    assert response.status_code == 200
    body = response.content.decode()
    assert "Starter rules, and why" in body and "Why: Tickets cost your team time" in body
    assert 'id="starter-create_ticket" tabindex="-1">' in body  # shown, not hidden
    assert re.search(r'name="\$\.tools\.builtin\.create_ticket\.enabled" checked', body)
    assert "Open a ticket only after the customer has described the problem" in body
    agent.refresh_from_db()
    assert "create_ticket" not in agent.config["tools"]["builtin"]


def test_starter_rules_are_the_registrys_and_leave_the_model_facing_text_alone():
    from tools import builtins

    assert builtins.lock_problems(builtins.read_lock()) == []
    for tool in builtins.all_builtins():
        assert len(tool.starter_rules) >= 2 and all(s.reasoning for s in tool.starter_rules)


def test_actions_paused_applies_at_once(alice):
    agent = agent_create(project=alice.project, name="Front desk")
    agent_publish(agent=agent, note="")
    client = signed_in(alice)
    response = client.post(f"/agents/{agent.pk}/actions-paused/", {"actions_paused": "on"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert b"Actions are paused for every version." in response.content
    agent.refresh_from_db()
    assert agent.actions_paused is True and agent.latest_version_number == 1
    client.post(f"/agents/{agent.pk}/actions-paused/", {})
    agent.refresh_from_db()
    assert agent.actions_paused is False


def test_publish_versions_diff_and_restore(alice):
    order_tool(alice)
    agent = agent_create(project=alice.project, name="Front desk", config={"instructions": "One."})
    client = signed_in(alice)
    assert client.post(f"/agents/{agent.pk}/publish/", {"note": "first"}).status_code == 302
    client.post(
        f"/agents/{agent.pk}/",
        editor_post(agent, **{"$.instructions": "Two.", "$.tools.http[order_status].used": "on"}),
    )
    page = client.get("/agents/").content.decode()
    assert "changed since publish" in page
    body = client.get(f"/agents/{agent.pk}/versions/").content.decode()
    assert "From version 1 to the draft" in body
    assert "$.config.instructions" in body and "$.config.tools.http[order_status]" in body
    assert "$.http_tools.order_status" in body
    assert client.post(f"/agents/{agent.pk}/publish/", {"note": "second"}).status_code == 302
    body = client.get(f"/agents/{agent.pk}/versions/?from=1&to=2").content.decode()
    assert "From version 1 to version 2" in body and "second" in body
    response = client.post(f"/agents/{agent.pk}/versions/1/restore/")
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.config["instructions"] == "One." and agent.latest_version_number == 2
    bad = client.post(f"/agents/{agent.pk}/publish/", {"note": "x" * 1001})
    assert bad.status_code == 422 and b"The note is text of at most 1000 characters." in bad.content


def test_an_egress_log_cursor_that_is_no_number_shows_the_first_page(alice):
    for cursor in ("²", "9" * 5000, "-3"):
        assert signed_in(alice).get("/egress/", {"cursor": cursor}).status_code == 200, cursor


def test_a_version_to_compare_that_is_no_number_shows_the_default_comparison(alice):
    agent = agent_create(project=alice.project, name="Front desk")
    agent_publish(agent=agent, note="First")
    client = signed_in(alice)
    for bad in ("²", "9" * 5000, "x", "-1"):
        response = client.get(f"/agents/{agent.pk}/versions/", {"from": bad, "to": "draft"})
        assert response.status_code == 200, bad


def test_publishing_a_grant_of_a_missing_tool_says_why(alice):
    agent = agent_create(project=alice.project, name="Front desk", config={"tools": {"http": [{"tool": "gone_tool"}]}})
    response = signed_in(alice).post(f"/agents/{agent.pk}/publish/", {"note": ""})
    assert response.status_code == 422
    assert b"The draft grants HTTP tool(s) that don&#x27;t exist: gone_tool" in response.content


# --- HTTP tools ---------------------------------------------------------------------------------------------------


def tool_form(**changes: Any) -> dict[str, Any]:
    form = {
        "$.name": "order_status",
        "$.description": "Look up an order.",
        "$.effect": "read",
        "$.config.method": "GET",
        "$.config.url": "https://api.example.com/orders/{{args.order_number}}",
        "$.config.headers.name": ["Authorization", ""],
        "$.config.headers.value": ["Bearer {{secret.ORDERS_TOKEN}}", ""],
        "$.config.parameters": json.dumps(
            {"type": "object", "properties": {"order_number": {"type": "string"}}, "required": ["order_number"]}
        ),
        "$.config.response.items_path": "data",
        "$.config.response.fields.path": ["status"],
        "$.config.response.fields.label": ["Status"],
        "$.config.timeout_ms": "8000",
    }
    form.update(changes)
    return form


def test_create_and_edit_a_tool(alice):
    secret_put(project=alice.project, name="ORDERS_TOKEN", value=TOKEN, allowed_hosts=["api.example.com"])
    client = signed_in(alice)
    response = client.post("/tools/new/", tool_form())
    assert response.status_code == 302 and response["Location"] == "/tools/order_status/"
    tool = HttpTool.objects.get(project=alice.project)
    assert tool.config["headers"] == {"Authorization": "Bearer {{secret.ORDERS_TOKEN}}"}
    assert tool.config["response"]["fields"] == [{"path": "status", "label": "Status"}]
    assert tool.config["timeout_ms"] == 8000
    assert b"order_status" in client.get("/tools/").content
    response = client.post("/tools/order_status/", tool_form(**{"$.description": "Where is my order?"}))
    assert response.status_code == 302
    tool.refresh_from_db()
    assert tool.description == "Where is my order?"


@pytest.mark.parametrize(
    ("changes", "field", "code_message"),
    [
        ({"$.config.headers.name": ["Host"], "$.config.headers.value": ["x"]}, "$.config.headers", "Host"),
        ({"$.name": "transfer_to_human"}, "$.name", "is the name of a built-in tool"),
        ({"$.config.url": "http://api.example.com/x"}, "$.config.url", "https"),
        (
            {"$.config.timeout_ms": "99999"},
            "$.config.timeout_ms",
            "The timeout is a whole number of milliseconds from 100 to 15000.",
        ),
        ({"$.config.timeout_ms": "²"}, "$.config.timeout_ms", "The timeout is a whole number"),  # isdigit(), not int()
        ({"$.config.parameters": "{nope"}, "$.config.parameters", "Parameters is not valid JSON"),
    ],
)
def test_a_tool_the_api_refuses_is_refused_next_to_its_field(alice, changes, field, code_message):
    from dashboard.problems import field_id

    secret_put(project=alice.project, name="ORDERS_TOKEN", value=TOKEN, allowed_hosts=["api.example.com"])
    response = signed_in(alice).post("/tools/new/", tool_form(**changes))
    assert response.status_code == 422
    errors = errors_on(response.content.decode())
    assert code_message in errors.get(field_id(field), ""), errors
    assert not HttpTool.objects.exists()


def test_preview_masks_secrets_and_follows_the_form(alice):
    secret_put(project=alice.project, name="ORDERS_TOKEN", value=TOKEN, allowed_hosts=["api.example.com"])
    client = signed_in(alice)
    response = client.post("/tools/preview/", tool_form(**{"$.sample.arguments.order_number": "٨٨١٢"}))
    body = response.content.decode()
    assert "GET https://api.example.com/orders/8812" in body
    assert "Authorization: Bearer ••••CRET" in body and TOKEN not in body
    missing = client.post("/tools/preview/", tool_form()).content.decode()
    assert "Nothing would be sent" in missing and "order_number" in missing
    broken = client.post("/tools/preview/", tool_form(**{"$.config.headers.name": ["Host"]})).content.decode()
    assert "preview yet" in broken and "The header Host can&#x27;t be set by a tool." in broken
    samples = client.post("/tools/samples/", tool_form(**{"$.config.parameters": '{"properties": {"sku": {}}}'}))
    assert b'name="$.sample.arguments.sku"' in samples.content
    assert not HttpTool.objects.exists()


def test_a_granted_tool_cannot_be_deleted(alice):
    order_tool(alice)
    agent_create(project=alice.project, name="A", config={"tools": {"http": [{"tool": "order_status"}]}})
    client = signed_in(alice)
    response = client.post("/tools/order_status/delete/")
    assert response.status_code == 409 and b"remove the grant first" in response.content
    Agent.objects.update(config={"tools": {}})
    assert client.post("/tools/order_status/delete/").status_code == 302
    assert not HttpTool.objects.exists()


# --- the test panel -------------------------------------------------------------------------------------------------


def test_panel_runs_the_draft_as_a_test_and_answers_a_client_tool(alice, fake_llm):
    fake_llm.script("panel", [calls(("get_cart", {})), text("Two items.")])
    agent = agent_create(
        project=alice.project,
        name="Front desk",
        config={
            "model": {"provider": "openai_compatible", "name": "script:panel"},
            "tools": {"client": [{"name": "get_cart", "description": "The cart.", "effect": "read"}]},
        },
    )
    client = signed_in(alice)
    empty = client.post(f"/agents/{agent.pk}/panel/send/", {"message": " "}, HTTP_HX_REQUEST="true")
    assert "Write the customer&#x27;s message: input can&#x27;t be empty." in empty.content.decode()
    response = client.post(
        f"/agents/{agent.pk}/panel/send/", {"message": "cart?", "customer": "cust-42"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    run = Run.objects.get(agent=agent)
    assert run.sandbox and not run.run_real_actions and run.version_number is None
    session = Session.objects.get(pk=run.session_id)
    assert session.is_test and session.end_user.external_id == "cust-42"
    assert f'hx-get="/agents/{agent.pk}/panel/runs/{run.pk}/"' in response.content.decode()  # polls while it works

    engine.run_execute(run.pk)  # what the worker does
    turn = client.get(f"/agents/{agent.pk}/panel/runs/{run.pk}/").content.decode()
    assert "Submit output" in turn and "hx-trigger" not in turn
    call_id = Run.objects.get(pk=run.pk).required_action["tool_calls"][0]["call_id"]
    answered = client.post(f"/agents/{agent.pk}/panel/runs/{run.pk}/outputs/", {f"output.{call_id}": '{"items": 2}'})
    assert answered.status_code == 200
    engine.run_execute(run.pk)
    turn = client.get(f"/agents/{agent.pk}/panel/runs/{run.pk}/").content.decode()
    assert "Two items." in turn
    assert "items" in fake_llm.requests("panel")[-1].tool_results[0]["content"]

    # The conversation goes on in the same session; New conversation starts another.
    client.post(f"/agents/{agent.pk}/panel/send/", {"message": "and now?"}, HTTP_HX_REQUEST="true")
    assert Run.objects.filter(session=session).count() == 2
    client.post(f"/agents/{agent.pk}/panel/new/", HTTP_HX_REQUEST="true")
    client.post(
        f"/agents/{agent.pk}/panel/send/", {"message": "hello", "run_real_actions": "on"}, HTTP_HX_REQUEST="true"
    )
    latest = Run.objects.filter(agent=agent).order_by("-pk").first()
    assert latest.session_id != session.pk and latest.run_real_actions and latest.end_user_id is None


def test_panel_says_why_the_agent_keeps_quiet_after_a_real_handoff(alice, fake_llm):
    fake_llm.script(
        "panel-handoff",
        [calls(("transfer_to_human", {"reason_type": "complaint", "summary": "x"})), text("The team has it.")],
    )
    agent = agent_create(
        project=alice.project,
        name="Front desk",
        config={
            "model": {"provider": "openai_compatible", "name": "script:panel-handoff"},
            "tools": {"allow_anonymous_actions": True},
        },
    )
    client = signed_in(alice)
    sent = {"message": "a person please", "run_real_actions": "on"}
    client.post(f"/agents/{agent.pk}/panel/send/", sent, HTTP_HX_REQUEST="true")
    engine.run_execute(Run.objects.get(agent=agent).pk)
    assert Run.objects.get(agent=agent).session.status == "handed_off"
    again = client.post(f"/agents/{agent.pk}/panel/send/", {"message": "hello?"}, HTTP_HX_REQUEST="true")
    assert "The team holds this test conversation" in again.content.decode()
    assert "/v1/sessions" not in again.content.decode()  # said for the panel, not for an app
    assert Run.objects.filter(agent=agent).count() == 1


# --- runs, the desk, the egress log -------------------------------------------------------------------------------


def test_runs_filters_and_a_runs_page(alice, fake_llm):
    run = answered_run(alice, fake_llm, "runs", "hi there", "Hello.")
    agent = run.agent
    client = signed_in(alice)
    body = client.get("/runs/?status=completed&sandbox=false").content.decode()
    assert f"/runs/{run.pk}/" in body
    assert f"/runs/{run.pk}/" not in client.get("/runs/?status=failed").content.decode()
    bad = client.get("/runs/?created_after=soon")
    assert bad.status_code == 422
    assert "created_after is Unix seconds or a date" in errors_on(bad.content.decode())["f-created_after"]
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Hello." in page and "Model round 1" in page and "Cancel run" not in page
    queued = run_create(project=alice.project, api_key=None, agent_id=agent.pk, text="later")
    assert "Cancel run" in client.get(f"/runs/{queued.pk}/").content.decode()
    assert client.post(f"/runs/{queued.pk}/cancel/").status_code == 302
    assert Run.objects.get(pk=queued.pk).status == "cancelled"


def test_desk_closes_and_reopens_tickets_and_handoffs(alice):
    agent = agent_create(project=alice.project, name="A")
    session = panel_session_create(project=alice.project, agent_id=agent.pk)
    Session.objects.filter(pk=session.pk).update(is_test=False, flagged=True, flag_reason="Threat", flag_urgency="high")
    ticket = Ticket.objects.create(
        project=alice.project, number=7, title="Broken", description="d", rate_key="x", session=session
    )
    test_ticket = Ticket.objects.create(
        project=alice.project, number=8, title="Test one", description="d", rate_key="x", is_test=True
    )
    handoff = Handoff.objects.create(project=alice.project, reason_type="complaint", summary="Angry", session=session)
    client = signed_in(alice)
    body = client.get("/desk/").content.decode()
    assert "TKT-7" in body and "TKT-8" not in body and "Angry" in body and "Threat" in body
    assert f"/sessions/{session.pk}/" in body
    assert "TKT-8" in client.get("/desk/?include_tests=true").content.decode()
    row = client.post(f"/desk/tickets/{ticket.pk}/", {"status": "closed"}, HTTP_HX_REQUEST="true")
    assert row.content.decode().strip().startswith(f'<tr id="ticket-{ticket.pk}">') and b"Reopen" in row.content
    ticket.refresh_from_db()
    assert ticket.status == "closed"
    client.post(f"/desk/tickets/{ticket.pk}/", {"status": "open"})
    ticket.refresh_from_db()
    assert ticket.status == "open"
    Session.objects.filter(pk=session.pk).update(status="handed_off")
    row = client.post(f"/desk/handoffs/{handoff.pk}/", {"status": "closed"}, HTTP_HX_REQUEST="true")
    assert b"Reopen" in row.content and b"closed" in row.content
    handoff.refresh_from_db()
    assert handoff.status == "closed" and handoff.closed_at is not None
    assert Session.objects.get(pk=session.pk).status == "closed"  # its last open handoff: the conversation is done
    client.post(f"/desk/handoffs/{handoff.pk}/", {"status": "open"})
    handoff.refresh_from_db()
    assert handoff.status == "open" and Session.objects.get(pk=session.pk).status == "handed_off"
    client.post(f"/desk/handoffs/{handoff.pk}/", {"status": "closed"})
    assert client.post(f"/desk/tickets/{test_ticket.pk}/", {"status": "maybe"}).status_code == 302
    test_ticket.refresh_from_db()
    assert test_ticket.status == "open"
    flagged_row = client.get("/desk/").content.decode().split('id="flagged"')[1]
    assert 'badge ok">closed</span>' in flagged_row  # the flagged conversation, closed with its handoff
    conversation = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "TKT-7" in conversation and "Threat" in conversation
    assert "Unverified" not in conversation
    # An answer whose claim no tool result confirmed is marked for the team (the customer didn't see it as written).
    run = Run.objects.create(project=alice.project, agent=agent, session=session, input="ticket?", rate_key="x")
    Message.objects.create(
        project=alice.project,
        session=session,
        run=run,
        role="assistant",
        content="TKT-99 is open.",
        unverified_claims=["ticket TKT-99"],
    )
    conversation = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "TKT-99 is open." in conversation and "Unverified: ticket TKT-99" in conversation


def test_the_desk_chart_counts_customers_runs_only(alice):
    agent = agent_create(project=alice.project, name="A")
    agent_publish(agent=agent, note="")
    client = signed_in(alice)
    assert "No customer runs in the last 30 days" in client.get("/desk/").content.decode()
    run_create(project=alice.project, api_key=None, agent_id=agent.pk, text="hi")
    run_create(project=alice.project, api_key=None, agent_id=agent.pk, text="test", sandbox=True)
    body = client.get("/desk/").content.decode()
    assert re.search(r"<strong>1</strong> runs", body)
    assert body.count('<rect class="runs"') == 1 and "1 runs, 0 failed" in body


def test_egress_log_page_filters_and_hides_refused_addresses(alice):
    EgressEvent.objects.create(
        project=alice.project,
        purpose="http_tool",
        method="GET",
        host="api.example.com",
        path="/x",
        resolved_address="93.184.216.34",
        decision="allowed",
        status=200,
    )
    EgressEvent.objects.create(
        project=alice.project,
        purpose="http_tool",
        method="GET",
        host="inside.example",
        path="/y",
        resolved_address="10.1.2.3",
        decision="refused",
        code="address_not_allowed",
    )
    client = signed_in(alice)
    body = client.get("/egress/").content.decode()
    assert "api.example.com" in body and "93.184.216.34" in body and "inside.example" in body
    assert "10.1.2.3" not in body
    refused = client.get("/egress/?decision=refused").content.decode()
    assert "GET inside.example/y" in refused and "GET api.example.com/x" not in refused
    assert client.get("/egress/?decision=maybe").status_code == 422


# --- settings: secrets, signing secrets, members --------------------------------------------------------------------


def test_secrets_are_write_only(alice):
    client = signed_in(alice)
    response = client.post(
        "/settings/secrets/",
        {"$.name": "ORDERS_TOKEN", "$.value": TOKEN, "$.allowed_hosts": "api.example.com, tools.example.com"},
    )
    assert response.status_code == 302
    secret = Secret.objects.get(project=alice.project)
    assert secret.allowed_hosts == ["api.example.com", "tools.example.com"]
    body = client.get("/settings/secrets/").content.decode()
    assert "••••CRET" in body and TOKEN not in body
    refused = client.post(
        "/settings/secrets/", {"$.name": "bad name", "$.value": TOKEN, "$.allowed_hosts": "api.example.com"}
    )
    assert refused.status_code == 422 and TOKEN not in refused.content.decode()
    assert "name starts with a capital letter" in errors_on(refused.content.decode())["f-name"]
    no_hosts = client.post("/settings/secrets/", {"$.name": "X_TOKEN", "$.value": TOKEN, "$.allowed_hosts": ""})
    assert (
        "Name at least one host this secret may be sent to" in errors_on(no_hosts.content.decode())["f-allowed_hosts"]
    )
    assert client.post("/settings/secrets/ORDERS_TOKEN/delete/").status_code == 302
    assert not Secret.objects.exists()


def test_signing_secrets_reveal_and_rotate(alice, api):
    client = signed_in(alice)
    page = client.get("/settings/signing-secret/").content.decode()
    assert "whsec_••••" in page and not re.search(r"whsec_[A-Za-z0-9+/=]{40}", page)
    revealed = client.post("/settings/signing-secret/tool/reveal/").content.decode()
    secret = api.get("/v1/tool_signing_secret").json()["secret"]
    assert secret in revealed
    rotated = client.post("/settings/signing-secret/tool/rotate/").content.decode()
    new = api.get("/v1/tool_signing_secret").json()
    assert new["secret"] != secret and new["secret"] in rotated and new["previous_secret_expires_at"]
    assert client.post("/settings/signing-secret/other/reveal/").status_code == 404


def test_members_invite_someone_new_who_then_signs_in_and_is_removed(alice):
    client = signed_in(alice)
    response = client.post("/settings/members/", {"$.email": "Carol@Example.com", "$.role": "member"})
    assert response.status_code == 302  # an invitation mailed: nothing to show but that it was sent
    assert "We sent an invitation to carol@example.com" in client.get("/settings/members/").content.decode()
    link = re.search(r"http://testserver(/invitations/\S+/)", mail.outbox[-1].body).group(1)
    fresh = Client()
    fresh.get(link)
    form = {"action": "join", "new_password1": "carol's own password", "new_password2": "carol's own password"}
    assert fresh.post("/invitations/accept/", form).status_code == 302
    assert fresh.get("/agents/").status_code == 200
    again = client.post("/settings/members/", {"$.email": "carol@example.com", "$.role": "admin"})
    assert again.status_code == 422 and "already a member" in errors_on(again.content.decode())["f-email"]
    bad = client.post("/settings/members/", {"$.email": "not an email", "$.role": "member"})
    assert "Enter an email address" in errors_on(bad.content.decode())["f-email"]
    carol = Membership.objects.get(user__email="carol@example.com")
    assert client.post(f"/settings/members/{carol.pk}/remove/").status_code == 302
    assert not Membership.objects.filter(pk=carol.pk).exists()
    owner = Membership.objects.get(user=alice.user)
    client.post(f"/settings/members/{owner.pk}/remove/")
    assert Membership.objects.filter(pk=owner.pk).exists()  # the last owner stays


# --- roles ----------------------------------------------------------------------------------------------------------

MANAGER_ONLY = [
    ("/settings/secrets/", {"$.name": "X_TOKEN", "$.value": "v" * 20, "$.allowed_hosts": "api.example.com"}),
    ("/settings/secrets/ORDERS_TOKEN/delete/", {}),
    ("/settings/signing-secret/tool/reveal/", {}),
    ("/settings/signing-secret/tool/rotate/", {}),
    ("/settings/signing-secret/end-user/reveal/", {}),
    ("/settings/members/", {"$.email": "eve@example.com", "$.role": "owner"}),
    ("/settings/api-keys/", {"kind": "secret", "name": "x"}),
]


def test_members_look_but_do_not_change_keys_secrets_or_members(alice):
    secret_put(project=alice.project, name="ORDERS_TOKEN", value=TOKEN, allowed_hosts=["api.example.com"])
    member = member_of(alice, "member", "mia@example.com")
    for path, form in MANAGER_ONLY:
        response = member.post(path, form)
        assert response.status_code == 403, path
        assert b"Only owners and admins" in response.content
    owner = Membership.objects.get(user=alice.user)
    assert member.post(f"/settings/members/{owner.pk}/remove/").status_code == 403
    assert Secret.objects.count() == 1 and Membership.objects.count() == 2
    assert not User.objects.filter(email="eve@example.com").exists() and not Invitation.objects.exists()
    for path in ("/settings/secrets/", "/settings/signing-secret/", "/settings/members/", "/settings/api-keys/"):
        body = member.get(path).content.decode()
        assert member.get(path).status_code == 200
        for control in (
            "Save secret",
            "Reveal</button>",
            "Rotate</button>",
            "Add member",
            "Create key",
            "Remove</button>",
        ):
            assert control not in body, (path, control)
    # Members do work on agents, tools and the desk.
    assert member.post("/agents/new/", {"$.name": "By a member"}).status_code == 302


def test_admins_manage_but_only_owners_make_owners(alice):
    admin = member_of(alice, "admin", "ada@example.com")
    refused = admin.post("/settings/members/", {"$.email": "eve@example.com", "$.role": "owner"})
    assert refused.status_code == 422
    assert "Only owners can invite owners." in refused.content.decode()
    assert admin.post("/settings/members/", {"$.email": "eve@example.com", "$.role": "admin"}).status_code == 302
    assert Invitation.objects.get(email="eve@example.com").role == "admin"
    assert (
        admin.post(
            "/settings/secrets/", {"$.name": "X_TOKEN", "$.value": "v" * 20, "$.allowed_hosts": "a.example.com"}
        ).status_code
        == 302
    )
    owner = Membership.objects.get(user=alice.user)
    admin.post(f"/settings/members/{owner.pk}/remove/")
    assert Membership.objects.filter(pk=owner.pk).exists()


# --- another organization's objects ---------------------------------------------------------------------------------


def test_webhook_endpoints_add_rotate_log_redeliver_disable_and_delete(alice):
    client = signed_in(alice)
    assert "No webhook endpoints yet" in client.get("/settings/webhooks/").content.decode()
    refused = client.post("/settings/webhooks/", {"$.url": "https://hooks.shop.example/k"})
    assert refused.status_code == 422 and "f-event_types" in errors_on(refused.content.decode())
    refused = client.post(
        "/settings/webhooks/", {"$.url": "http://hooks.shop.example/k", "$.event_types": ["ticket.created"]}
    )
    assert refused.status_code == 422 and "f-url" in errors_on(refused.content.decode())
    assert 'value="http://hooks.shop.example/k"' in refused.content.decode()  # what was typed stays
    assert WebhookEndpoint.objects.count() == 0

    added = client.post(
        "/settings/webhooks/",
        {"$.url": "https://hooks.shop.example/k", "$.event_types": ["ticket.created", "handoff.created"]},
    )
    assert added.status_code == 200
    secret = re.search(r'id="endpoint-secret">(whsec_[^<]+)<', added.content.decode()).group(1)
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.event_types == ["handoff.created", "ticket.created"]
    listing = client.get("/settings/webhooks/").content.decode()
    assert "https://hooks.shop.example/k" in listing and secret not in listing  # shown once

    ticket = Ticket.objects.create(project=alice.project, number=3, title="t", description="d", rate_key="x")
    event = WebhookEvent.objects.create(
        project=alice.project, type="ticket.created", object_id=ticket.pk, data={}, dispatched_at=timezone.now()
    )
    delivery = WebhookDelivery.objects.create(
        project=alice.project, endpoint=endpoint, event=event, status="failed", attempts=1
    )
    WebhookAttempt.objects.create(
        delivery=delivery,
        number=1,
        status_code=503,
        error_code="http_status",
        outcome="failed",
        response_excerpt="down",
    )
    detail = client.get(f"/settings/webhooks/{endpoint.pk}/").content.decode()
    assert event.pk in detail and "HTTP 503" in detail and "Redeliver" in detail and secret not in detail

    client.post(f"/settings/webhooks/{endpoint.pk}/deliveries/{delivery.pk}/redeliver/")
    delivery.refresh_from_db()
    assert (delivery.status, delivery.manual) == ("pending", True)

    rotated = client.post(f"/settings/webhooks/{endpoint.pk}/rotate/").content.decode()
    new_secret = re.search(r'id="endpoint-secret">(whsec_[^<]+)<', rotated).group(1)
    assert new_secret != secret and "previous secret also signs until" in rotated

    client.post(f"/settings/webhooks/{endpoint.pk}/enabled/", {"enabled": "false"})
    page = client.get(f"/settings/webhooks/{endpoint.pk}/").content.decode()
    assert "Disabled by the project." in page and "Redeliver" not in page
    client.post(f"/settings/webhooks/{endpoint.pk}/enabled/", {"enabled": "true"})
    assert WebhookEndpoint.objects.get().enabled is True

    member = member_of(alice, "member", "looker@example.com")
    assert member.post(f"/settings/webhooks/{endpoint.pk}/delete/").status_code == 403
    assert (
        member.post(
            "/settings/webhooks/", {"$.url": "https://x.example/", "$.event_types": ["ticket.created"]}
        ).status_code
        == 403
    )
    assert "Only owners and admins" in member.get("/settings/webhooks/").content.decode()
    client.post(f"/settings/webhooks/{endpoint.pk}/delete/")
    assert WebhookEndpoint.objects.count() == 0 and WebhookDelivery.objects.count() == 0


def test_what_a_member_sends_out_or_spends_on_the_model_is_limited_a_minute(alice, settings):
    """Test panel messages, tool test calls, knowledge fetches and webhook redeliveries go through no API key: each
    member of a project has KAGENT_DASHBOARD_ACTIONS of them a minute, refused after that with when to try again."""
    settings.KAGENT_DASHBOARD_ACTIONS = 2
    secret_put(project=alice.project, name="ORDERS_TOKEN", value=TOKEN, allowed_hosts=["api.example.com"])
    agent = agent_create(project=alice.project, name="Front desk")
    source = knowledge_source_create(
        project=alice.project,
        title="FAQ",
        kind="api",
        url="https://kb.example.com/faq",
        response={"fields": [{"path": "q", "label": "Q"}]},
    )
    KnowledgeSource.objects.filter(pk=source.pk).update(fetch_queued_at=None)
    limited = "test messages, test calls, fetches and redeliveries this minute; try again in"
    client = signed_in(alice)
    for message in ("one", "two"):
        client.post(f"/agents/{agent.pk}/panel/send/", {"message": message}, HTTP_HX_REQUEST="true")
    assert Run.objects.filter(agent=agent).count() == 2
    refused = client.post(f"/agents/{agent.pk}/panel/send/", {"message": "three"}, HTTP_HX_REQUEST="true")
    assert limited in refused.content.decode() and Run.objects.filter(agent=agent).count() == 2
    test_call = client.post("/tools/test-call/", tool_form(**{"$.sample.arguments.order_number": "8812"}))
    assert limited in test_call.content.decode() and not EgressEvent.objects.exists()  # nothing was sent
    client.post(f"/knowledge/{source.pk}/refresh/")
    assert limited in client.get(f"/knowledge/{source.pk}/").content.decode()
    assert KnowledgeSource.objects.get(pk=source.pk).fetch_queued_at is None  # no fetch queued

    other = member_of(alice, "member", "other@example.com")  # another member counts their own
    other.post(f"/agents/{agent.pk}/panel/send/", {"message": "four"}, HTTP_HX_REQUEST="true")
    assert Run.objects.filter(agent=agent).count() == 3


@pytest.mark.parametrize(
    "path",
    [
        "/knowledge/%00/",
        "/agents/%00/",
        "/agents/agt_%27%3B/panel/",
        "/runs/%00/",
        "/tools/%00/",
        "/tools/a%01b/delete/",
        "/settings/secrets/%00/delete/",
        "/settings/webhooks/%00/",
        "/desk/tickets/%00/",
    ],
)
def test_an_id_or_name_that_cant_be_ours_is_a_404_on_every_page(alice, path):
    client = signed_in(alice)
    for method in ("get", "post"):
        assert getattr(client, method)(path).status_code == 404, (method, path)


def _patterns(resolver: Any, prefix: str = "") -> list[tuple[str, URLPattern]]:
    out = []
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            out += _patterns(entry, prefix + str(entry.pattern))
        else:
            out.append((prefix + str(entry.pattern), entry))
    return out


@pytest.fixture
def alices_things(alice: Tenant, fake_llm: Any) -> dict[str, str]:
    """One of everything of alice's that a dashboard URL names."""
    fake_llm.script("things", [calls(("get_cart", {})), text("ok")])
    order_tool(alice)
    secret_put(project=alice.project, name="ORDERS_TOKEN", value=TOKEN, allowed_hosts=["api.example.com"])
    agent = agent_create(
        project=alice.project,
        name="Alice's agent",
        config={
            "model": {"provider": "openai_compatible", "name": "script:things"},
            "tools": {"client": [{"name": "get_cart", "description": "The cart.", "effect": "read"}]},
        },
    )
    agent_publish(agent=agent, note="")
    session = panel_session_create(project=alice.project, agent_id=agent.pk)
    run = run_create(
        project=alice.project, api_key=None, agent_id=agent.pk, text="hi", session_id=session.pk, sandbox=True
    )
    engine.run_execute(run.pk)
    ticket = Ticket.objects.create(project=alice.project, number=1, title="t", description="d", rate_key="x")
    handoff = Handoff.objects.create(project=alice.project, reason_type="complaint", summary="s")
    endpoint, _ = endpoint_create(
        project=alice.project, url="https://hooks.alice.example/k", event_types=["ticket.updated"]
    )
    event = WebhookEvent.objects.create(project=alice.project, type="ticket.updated", object_id=ticket.pk, data={})
    delivery = WebhookDelivery.objects.create(
        project=alice.project, endpoint=endpoint, event=event, status="failed", completed_at=timezone.now()
    )
    source = knowledge_source_create(project=alice.project, title="Alice's returns", content="# Returns\n\n30 days.")
    server = McpServer.objects.create(project=alice.project, name="shop", url="https://mcp.alice.example/mcp")
    check = Check.objects.create(project=alice.project, agent=agent, name="Alice's check", input="hi")
    return {
        "server_id": server.pk,
        "check_id": check.pk,
        "source_id": source.pk,
        "endpoint_id": endpoint.pk,
        "delivery_id": delivery.pk,
        "agent_id": agent.pk,
        "number": "1",
        "run_id": run.pk,
        "session_id": session.pk,
        "ticket_id": ticket.pk,
        "handoff_id": handoff.pk,
        "name": "ORDERS_TOKEN",
        "membership_id": str(Membership.objects.get(user=alice.user).pk),
        "invitation_id": invitation_send(
            organization=alice.organization,
            email="ivy@example.com",
            role="member",
            invited_by=Membership.objects.get(user=alice.user),
            base_url="http://testserver",
        ).pk,
        "token": "not-a-token-anyone-was-sent",  # a link's token is a credential: nobody else holds alice's
        "uidb64": urlsafe_base64_encode(force_bytes(alice.user.pk)),
        "key_id": alice.project.api_keys.first().pk,
        "project_id": alice.project.pk,
    }


def test_a_nul_character_in_a_form_post_is_refused_on_every_page_never_a_500(alice, alices_things):
    """A NUL can't be stored (PostgreSQL refuses it); the API's JSON parser refuses it before any view, and every
    dashboard page refuses it in a form post with a 422 that says so, changing nothing."""
    client = signed_in(alice)
    before = Agent.objects.get(pk=alices_things["agent_id"]).config
    refused = []
    for route, pattern in _patterns(get_resolver(dashboard_urls)):
        if pattern.name == "logout":
            continue
        kwargs = {param: alices_things.get(param, "x") for param in re.findall(r"<(?:\w+:)?(\w+)>", route)}
        if pattern.name in ("tool", "tool-delete", "secret-delete"):
            kwargs["name"] = "order_status" if pattern.name != "secret-delete" else "ORDERS_TOKEN"
        if "which" in kwargs:
            kwargs["which"] = "tool"
        url = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m, values=kwargs: str(values[m.group(1)]), route)
        url = url.replace("^", "").replace("$", "")
        response = client.post(url, {"$.name": "a\x00b", "message": "hi\x00", "$.url": "https://x.example/\x00"})
        assert response.status_code < 500, (url, response.status_code)
        if response.status_code == 422:
            refused.append(pattern.name)
    assert Agent.objects.get(pk=alices_things["agent_id"]).config == before
    assert {"agent", "agent-new", "panel-send", "tool-new", "tool-test-call", "webhooks", "knowledge"} <= set(refused)


def test_another_organizations_objects_are_a_404_on_every_page_and_htmx_endpoint(alice, bob, alices_things):
    """bob, signed in to his own project, tries every dashboard URL that names an object with alice's ids: each is a
    404 (or, for the one URL that picks a project, a 404 too), never alice's data, and nothing of alice's changes."""
    bob_agent = agent_create(project=bob.project, name="Bob's agent")
    client = signed_in(bob)
    assert client.get("/agents/").status_code == 200  # picks bob's project
    before = {
        "agent": Agent.objects.get(pk=alices_things["agent_id"]).config,
        "tickets": list(Ticket.objects.values_list("status", flat=True)),
        "secrets": Secret.objects.filter(project=alice.project).count(),
        "servers": list(McpServer.objects.values_list("name", "url")),
    }
    tried = set()
    for route, pattern in _patterns(get_resolver(dashboard_urls)):
        names = re.findall(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>", route)
        params = [a or b for a, b in names]
        if not params:
            continue
        if "which" in params:
            continue  # the signing secret's kind: no object of anyone's
        kwargs = {param: alices_things[param] for param in params}
        if pattern.name in ("tool", "tool-delete"):
            kwargs["name"] = "order_status"
        url = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m, values=kwargs: str(values[m.group(1)]), route)
        statuses = set()
        for method in ("get", "post"):
            for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
                response = getattr(client, method)(url, {}, **headers)
                assert response.status_code in (404, 405), (url, method, response.status_code)
                assert b"Alice" not in response.content and alices_things["run_id"].encode() not in response.content
                statuses.add(response.status_code)
        assert 404 in statuses, url  # the method it takes reached the lookup, and found nothing
        tried.add(pattern.name)
    # Alice's run on bob's own agent's panel is a 404 too.
    mixed = f"/agents/{bob_agent.pk}/panel/runs/{alices_things['run_id']}/"
    assert client.get(mixed).status_code == 404
    assert client.post(mixed + "outputs/", {}).status_code == 404
    assert tried >= {
        "agent",
        "agent-actions-paused",
        "agent-publish",
        "agent-delete",
        "agent-versions",
        "agent-version-restore",
        "panel",
        "panel-send",
        "panel-new",
        "panel-turn",
        "panel-outputs",
        "tool",
        "tool-delete",
        "run",
        "run-live",
        "run-cancel",
        "session",
        "session-events",
        "session-reply",
        "session-status",
        "ticket-update",
        "handoff-update",
        "secret-delete",
        "member-remove",
        "invitation-resend",
        "invitation-revoke",
        "invitation-link",
        "password-reset-confirm",
        "api-key-revoke",
        "project-select",
        "webhook",
        "webhook-rotate",
        "webhook-enabled",
        "webhook-delete",
        "webhook-redeliver",
        "knowledge-source",
        "knowledge-refresh",
        "knowledge-delete",
        "mcp-server",
        "mcp-server-refresh",
        "mcp-server-delete",
        "agent-rollback",
        "agent-traffic",
        "agent-check-add",
        "agent-checks-run",
        "agent-checks",
        "agent-check-from-run",
        "agent-check-delete",
        "approval-decide",
        "panel-approve",
    }
    endpoint = WebhookEndpoint.objects.get(pk=alices_things["endpoint_id"])
    assert endpoint.enabled and endpoint.previous_secret_ciphertext is None
    assert WebhookDelivery.objects.get(pk=alices_things["delivery_id"]).status == "failed"
    assert Agent.objects.get(pk=alices_things["agent_id"]).config == before["agent"]
    assert Agent.objects.get(pk=alices_things["agent_id"]).deleted_at is None
    assert list(Ticket.objects.values_list("status", flat=True)) == before["tickets"]
    assert Secret.objects.filter(project=alice.project).count() == before["secrets"]
    assert KnowledgeSource.objects.get(pk=alices_things["source_id"]).content == "# Returns\n\n30 days."
    assert Run.objects.get(pk=alices_things["run_id"]).status == "requires_action"
    assert list(McpServer.objects.values_list("name", "url")) == before["servers"]
    assert Check.objects.filter(project=alice.project).count() == 1
    assert Agent.objects.get(pk=alices_things["agent_id"]).traffic is None
    # Lists show none of alice's things.
    for path in (
        "/agents/",
        "/tools/",
        "/runs/",
        "/desk/?include_tests=true",
        "/egress/",
        "/settings/secrets/",
        "/settings/members/",
        "/settings/webhooks/",
        "/knowledge/",
    ):
        body = client.get(path).content.decode()
        assert "Alice" not in body and "alice@example.com" not in body and "<code>ORDERS_TOKEN</code>" not in body, path
        assert "mcp.alice.example" not in body, path


def test_the_editor_asks_for_approval_on_an_action_and_sets_the_wait(alice):
    agent = agent_create(project=alice.project, name="Approvals", config={})
    client = signed_in(alice)
    form = editor_post(
        agent,
        **{
            "$.tools.builtin.create_ticket.enabled": "on",
            "$.tools.builtin.create_ticket.approval": "ask",
            "$.tools.approval_expires_minutes": "45",
        },
    )
    assert client.post(f"/agents/{agent.pk}/", form).status_code == 302
    agent.refresh_from_db()
    assert agent.config["tools"]["builtin"]["create_ticket"]["approval"] == "ask"
    assert agent.config["tools"]["approval_expires_minutes"] == 45
    page = client.get(f"/agents/{agent.pk}/").content.decode()
    assert 'name="$.tools.builtin.create_ticket.approval" value="ask" checked' in page
    assert 'name="$.tools.builtin.search_knowledge.approval"' not in page  # a read never waits for a person
    # Out of range: refused next to its field, nothing written.
    bad = editor_post(agent, **{"$.tools.approval_expires_minutes": "0"})
    response = client.post(f"/agents/{agent.pk}/", bad)
    assert response.status_code == 422
    assert "f-tools-approval_expires_minutes" in errors_on(response.content.decode())
    agent.refresh_from_db()
    assert agent.config["tools"]["approval_expires_minutes"] == 45


def test_a_desk_decision_covers_only_the_calls_the_page_showed(alice, fake_llm):
    from runs.models import ToolCall
    from tests.dashboard.test_approvals_browser import waiting

    run, _ = waiting(alice, fake_llm, customer="cust-42", title="Refund 8812", script="stale")
    [call] = ToolCall.objects.filter(run=run)
    client = signed_in(alice)
    stale = client.post(f"/desk/approvals/{run.pk}/", {"decision": "approve", "call_id": "call_seen_before"})
    assert stale.status_code == 302
    assert ToolCall.objects.get(pk=call.pk).status == "awaiting_approval"  # nothing decided unseen
    shown = client.post(f"/desk/approvals/{run.pk}/", {"decision": "approve", "call_id": call.pk}, follow=True)
    assert "Approved" in shown.content.decode()
    assert ToolCall.objects.get(pk=call.pk).status == "pending"


def test_a_plain_save_keeps_a_switched_off_grant_that_asks_for_approval(alice):
    tool = order_tool(alice)
    http_tool_create(
        project=alice.project,
        name="refund_order",
        description="Refund an order.",
        effect="action",
        requires_verified_user=tool.requires_verified_user,
        config=tool.config,
    )
    config = {"tools": {"http": [{"tool": "refund_order", "enabled": False, "approval": "ask"}]}}
    agent = agent_create(project=alice.project, name="Keeps", config=config)
    before = Agent.objects.get(pk=agent.pk).config
    assert signed_in(alice).post(f"/agents/{agent.pk}/", editor_post(agent)).status_code == 302
    assert Agent.objects.get(pk=agent.pk).config["tools"]["http"] == before["tools"]["http"]


# --- a business owner's first day (issue 31) ------------------------------------------------------------------------


def test_the_version_diff_names_what_changed_and_marks_the_words(alice):
    agent = agent_create(project=alice.project, name="Front desk", config={"instructions": "Be kind and brief."})
    client = signed_in(alice)
    assert client.post(f"/agents/{agent.pk}/publish/", {"note": "first"}).status_code == 302
    client.post(f"/agents/{agent.pk}/", editor_post(agent, **{"$.instructions": "Be kind, warm and brief."}))
    body = client.get(f"/agents/{agent.pk}/versions/?from=1&to=draft").content.decode()
    assert "<strong>Instructions</strong>" in body
    assert "<del>kind</del> <ins>kind, warm</ins>" in body and "brief." in body


def test_a_tool_test_call_that_sent_nothing_says_so(alice):
    client = signed_in(alice)  # no ORDERS_TOKEN secret: the header can't be filled
    page = client.post("/tools/test-call/", tool_form(**{"$.sample.arguments.order_number": "8812"})).content.decode()
    assert 'id="test-not-sent"' in page and "Nothing was sent" in page
    assert "The call was signed" not in page


def answered_run(tenant: Tenant, fake_llm: Any, script: str, question: str, answer: str) -> Run:
    """A published agent's run (no key: as the dashboard starts one), answered by the scripted model."""
    fake_llm.script(script, [text(answer)])
    agent = agent_create(
        project=tenant.project,
        name=script,
        config={"model": {"provider": "openai_compatible", "name": f"script:{script}"}},
    )
    agent_publish(agent=agent, note="")
    run = run_create(project=tenant.project, api_key=None, agent_id=agent.pk, text=question)
    engine.run_execute(run.pk)
    return run


def test_the_runs_list_shows_each_answer_and_links_its_input(alice, fake_llm):
    run = answered_run(alice, fake_llm, "list", "where is my order?", "Your order ships tomorrow.")
    body = signed_in(alice).get("/runs/").content.decode()
    assert "Your order ships tomorrow." in body
    assert f'<a href="/runs/{run.pk}/">where is my order?</a>' in body


def test_the_test_panel_names_the_actions_an_anonymous_customer_is_not_offered(alice):
    tools = {"builtin": {"create_ticket": {"enabled": True}}}
    agent = agent_create(project=alice.project, name="Panel", config={"tools": tools})
    page = signed_in(alice).get(f"/agents/{agent.pk}/").content.decode()
    assert '<strong id="panel-left-out">then <code>create_ticket</code> is not offered</strong>' in page
    open_to_all = agent_create(
        project=alice.project, name="Open", config={"tools": {**tools, "allow_anonymous_actions": True}}
    )
    assert 'id="panel-left-out"' not in signed_in(alice).get(f"/agents/{open_to_all.pk}/").content.decode()


def test_the_versions_page_reads_every_versions_figures_in_the_same_few_queries(alice):
    """An agent published many times: the versions page's figures are read together, not three queries a version."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agents.services import agent_publish, agent_update

    agent = agent_create(project=alice.project, name="Front desk", config={"instructions": "One."})
    client = signed_in(alice)

    def statements() -> int:
        assert client.get(f"/agents/{agent.pk}/versions/").status_code == 200  # the session's own writes first
        with CaptureQueriesContext(connection) as seen:
            assert client.get(f"/agents/{agent.pk}/versions/").status_code == 200
        return len(seen.captured_queries)

    for number in range(1, 3):
        agent = agent_update(agent=agent, config_patch={"instructions": f"Version {number}."})
        agent_publish(agent=agent)
    with_two = statements()
    for number in range(3, 9):
        agent = agent_update(agent=agent, config_patch={"instructions": f"Version {number}."})
        agent_publish(agent=agent)
    assert statements() == with_two
    body = client.get(f"/agents/{agent.pk}/versions/").content.decode()
    assert "Version 8." in body or "version 8" in body.lower()


def test_run_checks_starts_them_on_a_worker_and_the_card_follows_until_the_results_are_in(alice, fake_llm):
    from checks import services as checks
    from checks.models import Check, CheckRun

    fake_llm.script("checks-card", [text("Our returns window is 30 days.")] * 5)
    agent = agent_create(
        project=alice.project,
        name="Front desk",
        config={"model": {"provider": "openai_compatible", "name": "script:checks-card"}},
    )
    Check.objects.create(
        project=alice.project, agent=agent, name="Returns", input="returns?", expect={"output_contains": ["30 days"]}
    )
    client = signed_in(alice)
    page = client.post(f"/agents/{agent.pk}/checks/run/", follow=True).content.decode()
    assert "The checks are running on the draft" in page  # answered at once, not when they are done
    check_run = CheckRun.objects.get(agent=agent)
    assert check_run.status == CheckRun.Status.RUNNING
    card = client.get(f"/agents/{agent.pk}/checks/status/").content.decode()
    assert 'hx-trigger="every 2s"' in card and "Running 1 check on the draft" in card
    assert "disabled" in card  # one run at a time from this card
    checks.check_run_execute(check_run.pk)  # what the worker does with the queued task
    card = client.get(f"/agents/{agent.pk}/checks/status/").content.decode()
    assert "hx-trigger" not in card and "all 1 passed" in card and "badge ok" in card
