"""The widget's files and its demo page as served, and the demo agent `bin/run` seeds for it."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.models import Agent

pytestmark = pytest.mark.django_db

AGENT = "agt_01m8rvn5y7dpf8faqx1r2aapbv"


def test_the_widget_is_served_at_the_sites_root(client):
    script = client.get("/widget.js")
    assert script.status_code == 200
    assert script["Content-Type"].startswith("text/javascript")
    body = b"".join(script.streaming_content).decode() if script.streaming else script.content.decode()
    assert "innerHTML" not in body  # every text goes in with textContent
    assert "Last-Event-ID" in body
    style = client.get("/widget.css")
    assert style.status_code == 200 and style["Content-Type"].startswith("text/css")


def test_the_demo_page_embeds_the_widget_with_the_key_and_agent_it_was_given(client, alice):
    page = client.get("/widget/demo/", {"key": alice.publishable_key, "agent": AGENT}).content.decode()
    assert f'<script src="/widget.js" data-key="{alice.publishable_key}" data-agent="{AGENT}"' in page


@pytest.mark.parametrize(
    ("key", "agent", "says"),
    [
        ("secret", AGENT, "that is a secret key"),
        ("ka_pk_short", AGENT, "starts with ka_pk_"),
        ("publishable", 'agt_"><script>alert(1)</script>', "agt_ followed by 26"),
    ],
)
def test_the_demo_page_refuses_what_is_not_a_publishable_key_and_an_agent(client, alice, key, agent, says):
    key = {"secret": alice.secret_key, "publishable": alice.publishable_key}.get(key, key)
    page = client.get("/widget/demo/", {"key": key, "agent": agent}).content.decode()
    assert says in page
    assert "data-key=" not in page and "<script>alert(1)</script>" not in page
    assert alice.secret_key not in page


def test_the_demo_agent_is_made_once_and_published(alice, capsys):
    call_command("kagent_demo_agent", "--project", alice.project.pk, "--json")
    first = json.loads(capsys.readouterr().out)
    call_command("kagent_demo_agent", "--project", alice.project.pk, "--json")
    assert json.loads(capsys.readouterr().out) == first
    agent = Agent.objects.get(pk=first["agent"]["id"])
    assert agent.versions.count() == 1
    assert agent.config["model"]["provider"] == "demo"
    with pytest.raises(CommandError):
        call_command("kagent_demo_agent", "--project", "proj_01m8rvn5y7dpf8faqx1r2aapbv")
