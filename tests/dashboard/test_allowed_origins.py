"""A publishable key's allowed origins on the API keys page (the browser flow is in test_widget.py): owners and
admins set them, members only read them, a secret key has none, another project's key is a 404."""

from __future__ import annotations

import pytest

from agents.services import agent_create, agent_publish
from kagent.models import ApiKey
from tests.dashboard.test_pages import member_of, signed_in

pytestmark = pytest.mark.django_db


def keys(tenant):
    return {key.kind: key for key in ApiKey.objects.filter(project=tenant.project)}


def test_members_read_the_origins_but_do_not_change_them(alice):
    publishable = keys(alice)[ApiKey.Kind.PUBLISHABLE]
    owner = signed_in(alice)
    saved = owner.post(f"/settings/api-keys/{publishable.pk}/origins/", {"allowed_origins": "https://shop.example"})
    assert saved.status_code == 302
    member = member_of(alice, "member", "mia@example.com")
    refused = member.post(f"/settings/api-keys/{publishable.pk}/origins/", {"allowed_origins": "https://evil.example"})
    assert refused.status_code == 403
    publishable.refresh_from_db()
    assert publishable.allowed_origins == ["https://shop.example"]
    page = member.get("/settings/api-keys/").content.decode()
    assert "https://shop.example" in page and "Save origins" not in page


def test_a_secret_key_has_no_origins_and_another_projects_key_is_a_404(alice, bob):
    owner = signed_in(alice)
    secret = keys(alice)[ApiKey.Kind.SECRET]
    response = owner.post(
        f"/settings/api-keys/{secret.pk}/origins/", {"allowed_origins": "https://shop.example"}, follow=True
    )
    assert "Only publishable keys are used from browsers" in response.content.decode()
    secret.refresh_from_db()
    assert secret.allowed_origins == []
    theirs = keys(bob)[ApiKey.Kind.PUBLISHABLE]
    response = owner.post(f"/settings/api-keys/{theirs.pk}/origins/", {"allowed_origins": "https://a.example"})
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.allowed_origins == []


def test_the_page_shows_the_embed_snippet_and_a_field_for_each_active_publishable_key(alice):
    page = signed_in(alice).get("/settings/api-keys/").content.decode()
    publishable = keys(alice)[ApiKey.Kind.PUBLISHABLE]
    assert f'id="f-allowed_origins-{publishable.pk}"' in page
    assert f'id="f-allowed_origins-{keys(alice)[ApiKey.Kind.SECRET].pk}"' not in page
    assert "/widget.js" in page


def test_a_new_publishable_key_comes_with_the_widgets_snippet(alice):
    page = signed_in(alice).post("/settings/api-keys/", {"kind": "publishable", "name": "website"}).content.decode()
    raw = page.split('id="new-key" class="key">')[1].split("<")[0]
    assert raw.startswith("ka_pk_")
    # The snippet to paste, with this key filled in (no agent is published yet: its place is marked).
    assert f'/widget.js" data-key="{raw}" data-agent="agt_…" async&gt;' in page
    assert 'data-copy="#widget-snippet"' in page and 'data-copy="#new-key"' in page
    assert page.count(raw) == 2  # the key, and the snippet: both on this page only
    agent = agent_create(project=alice.project, name="Front desk", config={})
    agent_publish(agent=agent, note="")
    page = signed_in(alice).post("/settings/api-keys/", {"kind": "publishable", "name": "site 2"}).content.decode()
    assert f'data-agent="{agent.pk}" async&gt;' in page and "Put Front desk on your website" in page
    secret = signed_in(alice).post("/settings/api-keys/", {"kind": "secret", "name": "server"}).content.decode()
    assert 'id="widget-snippet"' not in secret
