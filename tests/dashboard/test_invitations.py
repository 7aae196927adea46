"""Members join by invitation (issue 27, item 1: account take-over by an initial password).

Before: an owner or admin added any email; a new account got a password shown to the one who added it, and a second
organization adding the same email was told "they already have an account". The first adder could sign in as that
person and act in the second organization (a secret key minted in a project of an organization they don't belong to).
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from kagent.models import Membership, User
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db


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
    assert status_text(known.content.decode()).replace("carol@", "X@") == status_text(
        unknown.content.decode()
    ).replace("dan@", "X@")
    assert "already have an account" not in known.content.decode()

    # And nobody joined anything yet: carol says so herself, signed in.
    assert not Membership.objects.filter(user__email="carol@example.com").exists()
    assert not Membership.objects.filter(organization=bob.organization, user=alice.user).exists()
