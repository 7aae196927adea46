"""API key authentication: missing, malformed, wrong, revoked, publishable where not allowed."""

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from kagent.models import ApiKey


def error(response):
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    return body["error"]["code"]


@pytest.mark.django_db
def test_missing_key_is_401(alice):
    response = APIClient().get("/v1/agents")
    assert response.status_code == 401
    assert error(response) == "authentication_required"
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    [
        "ka_sk_abc",  # no scheme
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer ",
        "Bearer ka_sk_short",
        "Bearer sk_live_0123456789012345678901234567890123456789012",
        "Bearer ka_xx_0123456789012345678901234567890123456789012",
        "Bearer ka_sk_0123456789012345678901234567890123456789012 extra",
        "Bearer ka_sk_01234567890123456789012345678901234567890'--",
    ],
)
@pytest.mark.django_db
def test_malformed_key_is_401(alice, header):
    response = APIClient().get("/v1/agents", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert error(response) == "invalid_api_key"


@pytest.mark.django_db
def test_wrong_key_is_401(alice):
    wrong = "ka_sk_" + "A" * 43
    response = APIClient().get("/v1/agents", HTTP_AUTHORIZATION=f"Bearer {wrong}")
    assert response.status_code == 401
    assert error(response) == "invalid_api_key"


@pytest.mark.django_db
def test_revoked_key_is_401(alice):
    assert alice.client().get("/v1/agents").status_code == 200
    ApiKey.objects.filter(digest=ApiKey.digest_of(alice.secret_key)).update(revoked_at=timezone.now())
    response = alice.client().get("/v1/agents")
    assert response.status_code == 401
    assert error(response) == "api_key_revoked"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/v1/agents"),
        ("post", "/v1/agents"),
        ("get", "/v1/tools"),
        ("post", "/v1/tools"),
        ("get", "/v1/secrets"),
        ("put", "/v1/secrets/ORDERS_TOKEN"),
        ("get", "/v1/tool_signing_secret"),
        ("post", "/v1/tool_signing_secret/rotate"),
        ("get", "/v1/end_user_secret"),
    ],
)
@pytest.mark.django_db
def test_publishable_key_refused_outside_sessions_and_runs(alice, method, path):
    response = getattr(alice.client(alice.publishable_key), method)(path, {}, format="json")
    assert response.status_code == 403
    assert error(response) == "publishable_key_not_allowed"


@pytest.mark.django_db
def test_secret_key_works_and_records_last_use(alice):
    key = ApiKey.objects.get(digest=ApiKey.digest_of(alice.secret_key))
    assert key.last_used_at is None
    assert alice.client().get("/v1/agents").status_code == 200
    key.refresh_from_db()
    assert key.last_used_at is not None


@pytest.mark.django_db
def test_keys_are_stored_hashed(alice):
    digests = set(ApiKey.objects.values_list("digest", flat=True))
    assert alice.secret_key not in digests
    assert all(alice.secret_key[-8:] not in (k.hint + k.digest) for k in ApiKey.objects.all())
