"""Members join by invitation (issue 27, item 1: account take-over by an initial password).

Before: an owner or admin added any email; a new account got a password shown to the one who added it, and a second
organization adding the same email was told "they already have an account". The first adder could sign in as that
person and act in the second organization (a secret key minted in a project of an organization they don't belong to).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from kagent import throttle
from kagent.models import Invitation, Membership, User
from tests.conftest import Tenant, make_tenant

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
CHOSEN = "a password carol chose 42"


@pytest.fixture(autouse=True)
def fresh_counters(settings):
    # Counters of this test's own (the reset limits count per client address, the same 127.0.0.1 in every test).
    settings.CACHES = {name: {**config, "KEY_PREFIX": uuid.uuid4().hex} for name, config in settings.CACHES.items()}


def signed_in(tenant: Tenant) -> Client:
    client = Client()
    client.force_login(tenant.user)
    return client


def status_text(body: str) -> str:
    """The page's status line (what the one who added someone is told), tags stripped."""
    found = re.search(r'role="status">(.*?)</(?:div|ul)>', body, re.S)
    assert found, "no status on the page"
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())


def secrets_shown(bodies: list[str]) -> set[str]:
    """Every string on the pages that could be a password or a token."""
    return {word for body in bodies for word in re.findall(r"[A-Za-z0-9_\-]{12,}", body)}


def test_a_second_organization_adding_someones_email_gives_no_adder_a_way_in(alice, bob):
    """alice's organization adds carol, who is new; bob's organization adds carol too. Neither adder is shown
    anything that signs in as carol, bob is told the same as for an address nobody has, and carol is a member of
    neither organization until she says so."""
    adder = signed_in(alice)
    shown = [adder.get("/settings/members/").content.decode()]
    response = adder.post("/settings/members/", {"$.email": "carol@example.com", "$.role": "member"}, follow=True)
    assert response.status_code == 200
    shown.append(response.content.decode())

    second = signed_in(bob)
    known = second.post("/settings/members/", {"$.email": "carol@example.com", "$.role": "admin"}, follow=True)
    unknown = second.post("/settings/members/", {"$.email": "dan@example.com", "$.role": "admin"}, follow=True)
    shown += [known.content.decode(), unknown.content.decode()]
    # Nothing shown to either adder signs in as carol: no password exists that anyone but carol chose.
    carol = User.objects.filter(email="carol@example.com").first()
    if carol is not None:
        usable = [word for word in secrets_shown(shown) if carol.check_password(word)]
        assert usable == [], "an adder was shown carol's password"
    # No account discovery: an address that has an account gets the answer one that has none gets.
    assert known.status_code == unknown.status_code == 200
    assert status_text(known.content.decode()).replace("carol@", "X@") == status_text(unknown.content.decode()).replace(
        "dan@", "X@"
    )
    assert "already have an account" not in known.content.decode()

    # And nobody joined anything yet: carol says so herself, signed in.
    assert not Membership.objects.filter(user__email="carol@example.com").exists()
    assert not Membership.objects.filter(organization=bob.organization, user=alice.user).exists()


# --- helpers --------------------------------------------------------------------------------------------------------


def invite(client: Client, email: str, role: str = "member"):
    return client.post("/settings/members/", {"$.email": email, "$.role": role}, follow=True)


def link_in(message) -> str:
    """The path of the one link in a mail."""
    links = re.findall(r"https?://[^/\s]+(/\S*)", message.body)
    assert len(links) == 1, message.body
    return links[0]


def last_mail_to(email: str):
    sent = [message for message in mail.outbox if message.to == [email]]
    assert sent, f"no mail to {email}"
    return sent[-1]


def token_of(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[1]


# --- invitations ----------------------------------------------------------------------------------------------------


def test_someone_new_opens_the_link_chooses_a_password_and_is_a_member(alice):
    adder = signed_in(alice)
    response = invite(adder, "Carol@Example.com")
    assert response.redirect_chain[-1][0] == "/settings/members/"
    assert "We sent an invitation to carol@example.com" in status_text(response.content.decode())
    assert "no-store" in adder.get("/settings/members/")["Cache-Control"]
    # Nothing exists for carol but the invitation, which lists her and keeps only a digest of the link's token.
    assert not User.objects.filter(email="carol@example.com").exists()
    message = last_mail_to("carol@example.com")
    assert len(mail.outbox) == 1 and message.cc == [] and message.bcc == []  # to carol alone
    assert message.subject == "Join alice org on K-Agent"
    assert "alice@example.com invited you to join alice org on K-Agent as member" in message.body
    path = link_in(message)
    assert path.startswith("/invitations/") and message.body.count("http://testserver/invitations/") == 1
    token = token_of(path)
    invitation = Invitation.objects.get()
    assert invitation.token_digest == hashlib.sha256(token.encode()).hexdigest() and token not in str(
        Invitation.objects.values().get()
    )
    members_page = adder.get("/settings/members/").content.decode()
    assert "carol@example.com" in members_page and token not in members_page

    carol = Client()
    opened = carol.get(path)
    assert opened.status_code == 302 and opened["Location"] == "/invitations/accept/"  # the token leaves the URL
    page = carol.get("/invitations/accept/")
    assert page.status_code == 200 and "no-store" in page["Cache-Control"]
    body = page.content.decode()
    assert "Join alice org" in body and "Set password and join" in body and token not in body
    mismatched = carol.post(
        "/invitations/accept/", {"action": "join", "new_password1": CHOSEN, "new_password2": "something else 42"}
    )
    assert mismatched.status_code == 422 and not User.objects.filter(email="carol@example.com").exists()
    too_short = carol.post(
        "/invitations/accept/", {"action": "join", "new_password1": "short", "new_password2": "short"}
    )
    assert too_short.status_code == 422 and "too short" in too_short.content.decode()
    joined = carol.post("/invitations/accept/", {"action": "join", "new_password1": CHOSEN, "new_password2": CHOSEN})
    assert joined.status_code == 302 and joined["Location"] == "/agents/"
    assert carol.get("/agents/").status_code == 200  # signed in, in alice's organization's project
    membership = Membership.objects.get(user__email="carol@example.com")
    assert membership.organization == alice.organization and membership.role == "member"
    assert User.objects.get(email="carol@example.com").check_password(CHOSEN)
    assert Invitation.objects.get().accepted_at is not None
    # Single use: the link, and the page, are done with.
    assert Client().get(path).status_code == 404
    assert "no longer valid" in Client().get(path).content.decode()
    assert carol.get("/invitations/accept/").status_code == 404
    # Signing in later is with the password she chose.
    fresh = Client()
    assert fresh.post("/login/", {"username": "carol@example.com", "password": CHOSEN}).status_code == 302
    # She is a member now: inviting her again is refused as before.
    again = adder.post("/settings/members/", {"$.email": "carol@example.com", "$.role": "admin"})
    assert again.status_code == 422
    assert "already a member" in again.content.decode()


def test_a_link_opened_in_two_browsers_is_used_once(alice):
    invite(signed_in(alice), "carol@example.com")
    path = link_in(last_mail_to("carol@example.com"))
    first, second = Client(), Client()
    first.get(path)
    second.get(path)
    form = {"action": "join", "new_password1": CHOSEN, "new_password2": CHOSEN}
    assert first.post("/invitations/accept/", form).status_code == 302
    assert (
        second.post(
            "/invitations/accept/", {**form, "new_password1": "another one 4242", "new_password2": "another one 4242"}
        ).status_code
        == 404
    )
    assert User.objects.get(email="carol@example.com").check_password(CHOSEN)


def test_an_expired_link_opens_nothing(alice):
    invite(signed_in(alice), "carol@example.com")
    path = link_in(last_mail_to("carol@example.com"))
    carol = Client()
    assert carol.get(path).status_code == 302  # opened in time...
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    form = {"action": "join", "new_password1": CHOSEN, "new_password2": CHOSEN}
    assert carol.post("/invitations/accept/", form).status_code == 404  # ...but accepted too late
    assert Client().get(path).status_code == 404
    assert not User.objects.filter(email="carol@example.com").exists()
    assert "expired" in signed_in(alice).get("/settings/members/").content.decode()


def test_inviting_again_sends_a_fresh_link_and_voids_the_old_one(alice):
    adder = signed_in(alice)
    invite(adder, "carol@example.com", "member")
    old = link_in(last_mail_to("carol@example.com"))
    invite(adder, "carol@example.com", "admin")
    newer = link_in(last_mail_to("carol@example.com"))
    assert Invitation.objects.count() == 1 and Invitation.objects.get().role == "admin"
    assert Client().get(old).status_code == 404
    invitation = Invitation.objects.get()
    resent = adder.post(f"/settings/members/invitations/{invitation.pk}/resend/", follow=True)
    assert "We sent an invitation to carol@example.com" in status_text(resent.content.decode())
    newest = link_in(last_mail_to("carol@example.com"))
    assert len({old, newer, newest}) == 3
    assert Client().get(newer).status_code == 404
    assert Client().get(newest).status_code == 302


def test_revoke_voids_the_link(alice):
    adder = signed_in(alice)
    invite(adder, "carol@example.com")
    path = link_in(last_mail_to("carol@example.com"))
    invitation = Invitation.objects.get()
    member = Client()
    member.force_login(User.objects.create_user("mia@example.com", PASSWORD))
    Membership.objects.create(organization=alice.organization, user=User.objects.get(email="mia@example.com"))
    assert member.post(f"/settings/members/invitations/{invitation.pk}/revoke/").status_code == 403
    assert "Revoke" not in member.get("/settings/members/").content.decode()
    revoked = adder.post(f"/settings/members/invitations/{invitation.pk}/revoke/", follow=True)
    assert "Revoked the invitation to carol@example.com" in status_text(revoked.content.decode())
    assert not Invitation.objects.exists()
    assert Client().get(path).status_code == 404
    assert adder.post(f"/settings/members/invitations/{invitation.pk}/revoke/").status_code == 404


def test_only_owners_invite_owners_or_revoke_their_invitations(alice):
    admin_user = User.objects.create_user("ada@example.com", PASSWORD)
    Membership.objects.create(organization=alice.organization, user=admin_user, role="admin")
    admin = Client()
    admin.force_login(admin_user)
    refused = admin.post("/settings/members/", {"$.email": "eve@example.com", "$.role": "owner"})
    assert refused.status_code == 422 and "Only owners can invite owners." in refused.content.decode()
    assert not Invitation.objects.exists() and not mail.outbox
    invite(signed_in(alice), "eve@example.com", "owner")
    invitation = Invitation.objects.get()
    admin.post(f"/settings/members/invitations/{invitation.pk}/revoke/")
    admin.post(f"/settings/members/invitations/{invitation.pk}/resend/")
    assert Invitation.objects.get().token_digest == invitation.token_digest and len(mail.outbox) == 1
    assert "Only owners can revoke invitations of owners." in admin.get("/settings/members/").content.decode()


def test_an_existing_account_joins_only_by_accepting_signed_in_as_itself(alice, bob):
    """bob has an account (and his own organization). alice invites him: the link's holder can't set his password or
    join for him; signed in as someone else, they are told to sign out; signed in as bob, Accept invitation."""
    invite(signed_in(alice), "bob@example.com", "admin")
    path = link_in(last_mail_to("bob@example.com"))
    anonymous = Client()
    anonymous.get(path)
    page = anonymous.get("/invitations/accept/").content.decode()
    assert "sign in with it, then accept" in page and "Set password and join" not in page
    # No password is set through the link for an account that has one, whatever is posted.
    form = {"action": "join", "new_password1": CHOSEN, "new_password2": CHOSEN}
    assert anonymous.post("/invitations/accept/", form).status_code == 409
    anonymous.post("/invitations/accept/", {"action": "accept"})
    bob.user.refresh_from_db()
    assert bob.user.check_password(PASSWORD) and not bob.user.check_password(CHOSEN)
    assert not Membership.objects.filter(organization=alice.organization, user=bob.user).exists()

    # Signed in as someone else (erin): Accept invitation joins nobody; Sign out keeps the invitation going.
    erin = make_tenant("erin")
    other = Client()
    other.force_login(erin.user)
    other.get(path)
    page = other.get("/invitations/accept/").content.decode()
    assert "You are signed in as erin@example.com" in page and "Accept invitation" not in page
    refused = other.post("/invitations/accept/", {"action": "accept"})
    assert refused.status_code == 403 and "sign in with that address" in refused.content.decode()
    assert not Membership.objects.filter(organization=alice.organization, user=erin.user).exists()
    assert other.post("/invitations/accept/", {"action": "sign-out"}).status_code == 302
    assert "_auth_user_id" not in other.session
    assert "sign in with it, then accept" in other.get("/invitations/accept/").content.decode()

    # bob signs in (the sign-in page sends him back to the invitation) and accepts.
    signed = anonymous.post(
        "/login/", {"username": "bob@example.com", "password": PASSWORD, "next": "/invitations/accept/"}
    )
    assert signed.status_code == 302 and signed["Location"] == "/invitations/accept/"
    page = anonymous.get("/invitations/accept/").content.decode()
    assert "Accept invitation" in page
    accepted = anonymous.post("/invitations/accept/", {"action": "accept"})
    assert accepted.status_code == 302
    membership = Membership.objects.get(organization=alice.organization, user=bob.user)
    assert membership.role == "admin"
    assert anonymous.get("/agents/").status_code == 200
    assert anonymous.session["kagent_project_id"] == alice.project.pk  # working in the organization he joined
    assert Client().get(path).status_code == 404


def test_the_answer_is_the_same_for_an_address_with_an_account_and_one_without(alice, bob):
    adder = signed_in(alice)
    known, unknown = invite(adder, "bob@example.com"), invite(adder, "nobody@example.com")
    assert known.status_code == unknown.status_code == 200
    assert status_text(known.content.decode()).replace("bob@", "X@") == status_text(unknown.content.decode()).replace(
        "nobody@", "X@"
    )
    first, second = last_mail_to("bob@example.com"), last_mail_to("nobody@example.com")
    strip = re.compile(r"/invitations/\S+")
    assert strip.sub("", first.body) == strip.sub("", second.body) and first.subject == second.subject
    assert not User.objects.filter(email="nobody@example.com").exists()


def test_a_removed_member_s_invitations_die_with_their_membership(alice):
    admin_user = User.objects.create_user("ada@example.com", PASSWORD)
    admin_membership = Membership.objects.create(organization=alice.organization, user=admin_user, role="admin")
    admin = Client()
    admin.force_login(admin_user)
    invite(admin, "carol@example.com")
    invite(signed_in(alice), "dan@example.com")
    path = link_in(last_mail_to("carol@example.com"))
    assert signed_in(alice).post(f"/settings/members/{admin_membership.pk}/remove/").status_code == 302
    assert list(Invitation.objects.values_list("email", flat=True)) == ["dan@example.com"]
    assert Client().get(path).status_code == 404


def test_mail_that_cant_be_sent_leaves_nothing_behind(alice, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2  # nothing listens
    response = signed_in(alice).post("/settings/members/", {"$.email": "carol@example.com", "$.role": "member"})
    assert response.status_code == 422
    assert "Not sent: the mail to carol@example.com couldn" in response.content.decode()
    assert not Invitation.objects.exists()


def test_links_name_the_public_url_or_a_host_the_server_answers_to(alice, settings):
    adder = signed_in(alice)
    settings.KAGENT_PUBLIC_URL = "https://kagent.example.com"
    invite(adder, "carol@example.com")
    assert "https://kagent.example.com/invitations/" in last_mail_to("carol@example.com").body
    # Unset: the request's host, which must be one of ALLOWED_HOSTS; a forged one sends nothing.
    settings.KAGENT_PUBLIC_URL = ""
    sent = len(mail.outbox)
    forged = adder.post(
        "/settings/members/", {"$.email": "dan@example.com", "$.role": "member"}, HTTP_HOST="evil.example"
    )
    assert forged.status_code == 400 and len(mail.outbox) == sent
    # Any host allowed: no mail, until the operator sets KAGENT_PUBLIC_URL.
    settings.ALLOWED_HOSTS = ["*"]
    refused = adder.post(
        "/settings/members/", {"$.email": "dan@example.com", "$.role": "member"}, HTTP_HOST="evil.example"
    )
    assert refused.status_code == 422 and "KAGENT_PUBLIC_URL" in refused.content.decode()
    assert len(mail.outbox) == sent and not Invitation.objects.filter(email="dan@example.com").exists()


def test_an_organization_sends_a_bounded_number_of_invitations(alice, monkeypatch):
    monkeypatch.setattr(throttle, "INVITATIONS_PER_HOUR", 2)
    adder = signed_in(alice)
    invite(adder, "a@example.com")
    invite(adder, "b@example.com")
    refused = adder.post("/settings/members/", {"$.email": "c@example.com", "$.role": "member"})
    assert refused.status_code == 422 and "more than 2 invitations this hour" in refused.content.decode()
    assert len(mail.outbox) == 2
