"""Dashboard skeleton through Django's test client: sign in and out, the project picker, API keys."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from rest_framework.test import APIClient

from agents.services import agent_create
from dashboard.access import SESSION_KEY
from kagent.models import ApiKey, Membership, Project, User
from tests.conftest import Tenant

PASSWORD = "correct horse battery"
KEYS_URL = "/settings/api-keys/"
RAW_KEY_RE = re.compile(r"ka_(?:sk|pk)_[A-Za-z0-9_-]{43}")


def signed_in(tenant: Tenant) -> Client:
    client = Client()
    response = client.post("/login/", {"username": tenant.user.email, "password": PASSWORD})
    assert response.status_code == 302, response.content
    return client


def api_status(raw_key: str) -> tuple[int, dict]:
    response = APIClient().get("/v1/agents", HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return response.status_code, response.json()


def create_key(client: Client, kind: str = "secret", name: str = "from the dashboard") -> str:
    response = client.post(KEYS_URL, {"kind": kind, "name": name})
    assert response.status_code == 200
    raw_keys = RAW_KEY_RE.findall(response.content.decode())
    # Once; a publishable key a second time in the widget's snippet, filled in to be copied.
    assert len(set(raw_keys)) == 1 and len(raw_keys) == (2 if kind == "publishable" else 1), raw_keys
    return raw_keys[0]


def key_row(tenant: Tenant, raw_key: str) -> ApiKey:
    return ApiKey.objects.get(project=tenant.project, digest=ApiKey.digest_of(raw_key))


# --- signing in and out ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_home_sends_a_signed_out_visitor_to_login():
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"] == "/login/"


def test_home_sends_a_signed_in_user_to_agents(alice):
    response = signed_in(alice).get("/")
    assert response.status_code == 302
    assert response["Location"] == "/agents/"


def test_pages_need_a_session(alice):
    for path in ("/agents/", KEYS_URL, "/projects/"):
        response = Client().get(path)
        assert response.status_code == 302
        assert response["Location"].startswith(f"/login/?next={path}")


def test_login_page_renders(alice):
    response = Client().get("/login/")
    assert response.status_code == 200
    assert b'type="email"' in response.content
    assert b'type="password"' in response.content


def test_login_with_email_and_password_lands_on_agents(alice):
    client = Client()
    response = client.post("/login/", {"username": "alice@example.com", "password": PASSWORD}, follow=True)
    assert response.redirect_chain[0] == ("/agents/", 302)
    assert response.status_code == 200
    assert b"<h1>Agents</h1>" in response.content
    assert b"alice project" in response.content  # the one project was picked without asking
    assert client.session["_auth_user_id"] == str(alice.user.pk)


def test_login_ignores_the_case_of_the_email(alice):
    response = Client().post("/login/", {"username": "Alice@Example.COM", "password": PASSWORD})
    assert response.status_code == 302
    assert response["Location"] == "/agents/"


def test_wrong_password_shows_an_error_and_opens_no_session(alice):
    client = Client()
    response = client.post("/login/", {"username": "alice@example.com", "password": "wrong horse"})
    assert response.status_code == 200
    assert b'role="alert"' in response.content
    assert b"enter a correct email and password" in response.content.lower()
    assert "_auth_user_id" not in client.session
    assert client.get("/agents/").status_code == 302


def test_unknown_email_shows_the_same_error(alice):
    response = Client().post("/login/", {"username": "nobody@example.com", "password": PASSWORD})
    assert response.status_code == 200
    assert b"enter a correct email and password" in response.content.lower()


def test_login_does_not_redirect_off_site(alice):
    response = Client().post(
        "/login/?next=https://evil.example/", {"username": "alice@example.com", "password": PASSWORD}
    )
    assert response.status_code == 302
    assert response["Location"] == "/agents/"


def test_logout_is_post_only(alice):
    client = signed_in(alice)
    assert client.get("/logout/").status_code == 405
    assert client.get("/agents/").status_code == 200, "a GET must not sign the user out"
    response = client.post("/logout/")
    assert response.status_code == 302
    assert response["Location"] == "/login/"
    assert "_auth_user_id" not in client.session
    assert client.get("/agents/").status_code == 302


# --- the project picker ----------------------------------------------------------------------------


@pytest.fixture
def alice_second_project(alice: Tenant) -> Project:
    return Project.objects.create(organization=alice.organization, name="alice second project")


def test_picker_lists_only_the_users_projects(alice, bob, alice_second_project):
    response = signed_in(alice).get("/projects/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "alice project" in body
    assert "alice second project" in body
    assert "bob" not in body
    assert bob.project.id not in body


def test_with_two_projects_the_user_picks_one(alice, alice_second_project):
    client = signed_in(alice)
    response = client.get("/agents/")
    assert response.status_code == 302
    assert response["Location"] == "/projects/"
    response = client.post(f"/projects/{alice_second_project.id}/select/")
    assert response.status_code == 302
    assert response["Location"] == "/agents/"
    assert client.session[SESSION_KEY] == alice_second_project.id
    assert b"alice second project" in client.get("/agents/").content


def test_selecting_someone_elses_project_is_a_404(alice, bob):
    client = signed_in(alice)
    client.get("/agents/")  # picks alice's only project
    response = client.post(f"/projects/{bob.project.id}/select/")
    assert response.status_code == 404
    assert client.session[SESSION_KEY] == alice.project.id
    assert b"bob" not in client.get(KEYS_URL).content


def test_selecting_a_project_is_post_only(alice):
    client = signed_in(alice)
    assert client.get(f"/projects/{alice.project.id}/select/").status_code == 405


def test_a_forged_session_project_is_not_used(alice, bob):
    """A project id in the session that the user is not a member of is ignored, never trusted."""
    client = signed_in(alice)
    session = client.session
    session[SESSION_KEY] = bob.project.id
    session.save()
    response = client.get(KEYS_URL)
    assert response.status_code == 200
    assert b"alice project" in response.content
    assert b"bob project" not in response.content


# --- API keys --------------------------------------------------------------------------------------


def test_api_keys_page_lists_the_projects_keys_by_hint_only(alice, bob):
    response = signed_in(alice).get(KEYS_URL)
    assert response.status_code == 200
    body = response.content.decode()
    for key in ApiKey.objects.filter(project=alice.project):
        assert f'id="key-{key.id}"' in body
        assert key.hint in body
    for key in ApiKey.objects.filter(project=bob.project):
        assert key.id not in body
    assert not RAW_KEY_RE.search(body), "no raw key on the page"
    assert alice.secret_key not in body
    assert "Create key" in body
    assert "Revoke" in body


def test_created_key_is_shown_once_and_works_until_revoked(alice):
    client = signed_in(alice)
    raw = create_key(client, name="billing server")
    assert raw.startswith("ka_sk_")
    key = key_row(alice, raw)
    assert key.name == "billing server"
    assert key.kind == "secret"
    assert key.digest != raw and raw not in key.hint

    # A reload doesn't show it again: only the hint.
    body = client.get(KEYS_URL).content.decode()
    assert raw not in body
    assert not RAW_KEY_RE.search(body)
    assert key.hint in body

    status, _ = api_status(raw)
    assert status == 200
    key.refresh_from_db()
    assert key.last_used_at is not None

    response = client.post(f"/settings/api-keys/{key.id}/revoke/")
    assert response.status_code == 302
    assert response["Location"] == KEYS_URL
    status, body = api_status(raw)
    assert status == 401
    assert body["error"]["code"] == "api_key_revoked"
    # The other keys of the project keep working.
    assert api_status(alice.secret_key)[0] == 200


def test_page_revealing_a_key_is_not_cached(alice):
    response = signed_in(alice).post(KEYS_URL, {"kind": "secret", "name": ""})
    assert "no-store" in response["Cache-Control"]


def test_publishable_key_from_the_dashboard_is_refused_on_agents(alice):
    raw = create_key(signed_in(alice), kind="publishable")
    assert raw.startswith("ka_pk_")
    status, body = api_status(raw)
    assert status == 403
    assert body["error"]["code"] == "publishable_key_not_allowed"


def test_invalid_kind_creates_nothing(alice):
    before = ApiKey.objects.count()
    response = signed_in(alice).post(KEYS_URL, {"kind": "root", "name": "x"})
    assert response.status_code == 200
    assert b'role="alert"' in response.content
    assert ApiKey.objects.count() == before


def test_revoke_with_htmx_returns_the_row(alice):
    client = signed_in(alice)
    key = key_row(alice, alice.secret_key)
    response = client.post(f"/settings/api-keys/{key.id}/revoke/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode().strip()
    assert body.startswith(f'<tr id="key-{key.id}">')
    assert "revoked" in body
    assert "Revoke</button>" not in body
    assert api_status(alice.secret_key)[1]["error"]["code"] == "api_key_revoked"


def test_revoke_is_post_only(alice):
    key = key_row(alice, alice.secret_key)
    assert signed_in(alice).get(f"/settings/api-keys/{key.id}/revoke/").status_code == 405
    assert api_status(alice.secret_key)[0] == 200


def test_revoke_needs_the_csrf_token(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice.user)
    key = key_row(alice, alice.secret_key)
    assert client.post(f"/settings/api-keys/{key.id}/revoke/").status_code == 403
    assert api_status(alice.secret_key)[0] == 200


def test_revoking_twice_keeps_the_first_time(alice):
    client = signed_in(alice)
    key = key_row(alice, alice.secret_key)
    client.post(f"/settings/api-keys/{key.id}/revoke/")
    key.refresh_from_db()
    first = key.revoked_at
    assert first is not None
    assert client.post(f"/settings/api-keys/{key.id}/revoke/").status_code == 302
    key.refresh_from_db()
    assert key.revoked_at == first


@pytest.fixture
def carol(alice: Tenant) -> User:
    """A plain member of alice's organization: may look, may not change keys."""
    user = User.objects.create_user("carol@example.com", PASSWORD)
    Membership.objects.create(organization=alice.organization, user=user, role=Membership.Role.MEMBER)
    return user


def test_member_sees_keys_without_buttons(alice, carol):
    client = Client()
    client.post("/login/", {"username": "carol@example.com", "password": PASSWORD})
    response = client.get(KEYS_URL)
    assert response.status_code == 200
    body = response.content.decode()
    assert key_row(alice, alice.secret_key).hint in body
    assert "Create key" not in body
    assert "Revoke" not in body
    assert "/revoke/" not in body


def test_member_cannot_create_or_revoke(alice, carol):
    client = Client()
    client.post("/login/", {"username": "carol@example.com", "password": PASSWORD})
    before = ApiKey.objects.filter(project=alice.project).count()
    response = client.post(KEYS_URL, {"kind": "secret", "name": "sneaky"})
    assert response.status_code == 403
    assert b"Only owners and admins" in response.content
    assert not RAW_KEY_RE.search(response.content.decode())
    assert ApiKey.objects.filter(project=alice.project).count() == before

    key = key_row(alice, alice.secret_key)
    assert client.post(f"/settings/api-keys/{key.id}/revoke/").status_code == 403
    assert client.post(f"/settings/api-keys/{key.id}/revoke/", HTTP_HX_REQUEST="true").status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None
    assert api_status(alice.secret_key)[0] == 200


@pytest.mark.parametrize("role", [Membership.Role.ADMIN, Membership.Role.OWNER])
def test_admins_and_owners_manage_keys(alice, role):
    user = User.objects.create_user("dave@example.com", PASSWORD)
    Membership.objects.create(organization=alice.organization, user=user, role=role)
    client = Client()
    client.post("/login/", {"username": "dave@example.com", "password": PASSWORD})
    raw = create_key(client)
    assert api_status(raw)[0] == 200


# --- someone else's project ------------------------------------------------------------------------


def test_revoking_someone_elses_key_is_a_404_and_it_keeps_working(alice, bob):
    client = signed_in(alice)
    bob_key = key_row(bob, bob.secret_key)
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        response = client.post(f"/settings/api-keys/{bob_key.id}/revoke/", **headers)
        assert response.status_code == 404
        assert b"bob" not in response.content
    bob_key.refresh_from_db()
    assert bob_key.revoked_at is None
    assert api_status(bob.secret_key)[0] == 200


def test_unknown_key_is_a_404(alice):
    response = signed_in(alice).post("/settings/api-keys/key_doesnotexist/revoke/")
    assert response.status_code == 404


def test_a_key_created_by_alice_belongs_to_alices_project_only(alice, bob):
    raw = create_key(signed_in(alice))
    assert key_row(alice, raw).project_id == alice.project.id
    response = APIClient().get("/v1/agents", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.json()["data"] == []
    # bob sees nothing of it on his page.
    body = signed_in(bob).get(KEYS_URL).content.decode()
    assert key_row(alice, raw).id not in body


def test_agents_page_lists_only_the_projects_agents(alice, bob):
    agent_create(project=alice.project, name="Alice's front desk")
    agent_create(project=bob.project, name="Bob's night shift")
    body = signed_in(alice).get("/agents/").content.decode()
    assert "Alice&#x27;s front desk" in body
    assert "night shift" not in body


def test_behind_the_tls_proxy_the_dashboard_sends_hsts_and_secure_cookies(alice):
    # The suite runs with DEBUG=false, KAGENT_HTTPS unset: production's defaults. The proxy says the client used
    # HTTPS with X-Forwarded-Proto.
    client = Client(HTTP_X_FORWARDED_PROTO="https")
    page = client.get("/login/")
    assert page["Strict-Transport-Security"].startswith("max-age=31536000")
    response = client.post("/login/", {"username": "alice@example.com", "password": PASSWORD})
    assert response.status_code == 302
    assert response.cookies["sessionid"]["secure"] is True
    assert Client().get("/login/").get("Strict-Transport-Security") is None  # plain HTTP (the health check)
