import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from kagent.models import ApiKey, Membership, Organization, Project, User


def bootstrap(*extra: str) -> dict:
    out = StringIO()
    call_command(
        "kagent_bootstrap",
        "--org",
        "Acme",
        "--project",
        "Support",
        "--email",
        "Owner@Example.com",
        "--password",
        "s3cret-pass",
        "--json",
        *extra,
        stdout=out,
    )
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_bootstrap_creates_everything_and_prints_keys_once():
    first = bootstrap()
    assert set(first) == {"organization", "project", "secret_key", "publishable_key", "dashboard_user"}
    assert first["secret_key"].startswith("ka_sk_")
    assert first["publishable_key"].startswith("ka_pk_")
    assert first["dashboard_user"] == {"email": "owner@example.com"}
    user = User.objects.get(email="owner@example.com")
    assert user.check_password("s3cret-pass")
    membership = Membership.objects.get(user=user)
    assert membership.role == "owner"
    # Keys are stored hashed, never in the clear.
    assert not ApiKey.objects.filter(digest=first["secret_key"]).exists()
    assert ApiKey.objects.filter(digest=ApiKey.digest_of(first["secret_key"]), kind="secret").exists()


@pytest.mark.django_db
def test_bootstrap_is_idempotent():
    first = bootstrap()
    second = bootstrap()
    assert second["organization"] == first["organization"]
    assert second["project"] == first["project"]
    assert second["secret_key"] is None and second["publishable_key"] is None
    assert Organization.objects.count() == 1
    assert Project.objects.count() == 1
    assert User.objects.count() == 1
    assert Membership.objects.count() == 1
    assert ApiKey.objects.count() == 2


@pytest.mark.django_db
def test_bootstrap_new_keys_only_when_asked():
    first = bootstrap()
    third = bootstrap("--new-keys")
    assert third["project"] == first["project"]
    assert third["secret_key"].startswith("ka_sk_") and third["secret_key"] != first["secret_key"]
    assert ApiKey.objects.filter(kind="secret").count() == 2


@pytest.mark.django_db
def test_bootstrap_replaces_a_revoked_key():
    from django.utils import timezone

    bootstrap()
    ApiKey.objects.filter(kind="secret").update(revoked_at=timezone.now())
    again = bootstrap()
    assert again["secret_key"].startswith("ka_sk_")
    assert again["publishable_key"] is None


@pytest.mark.django_db
def test_bootstrap_refuses_empty_values():
    with pytest.raises(CommandError):
        call_command("kagent_bootstrap", "--org", " ", "--project", "p", "--email", "a@b.c", "--password", "x")
    assert Organization.objects.count() == 0
