"""Secrets are write-only, encrypted at rest and bound to their project and name; signing secrets rotate with a
24-hour overlap."""

import base64
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from kagent import crypto
from kagent.models import Secret, SigningSecret
from kagent.secrets import secret_resolve, signing_secrets_valid
from tests.kagent.test_auth import error

VALUE = "sk_live_TOPSECRET_0123456789_zyxw"


@pytest.fixture
def everything_logged(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


def put(api, name="ORDERS_TOKEN", value=VALUE, hosts=("api.example.com",)):
    return api.put(f"/v1/secrets/{name}", {"value": value, "allowed_hosts": list(hosts)}, format="json")


@pytest.mark.django_db
def test_secret_lifecycle_never_returns_the_value(api, everything_logged):
    created = put(api)
    assert created.status_code == 201
    body = created.json()
    assert body == {
        "object": "secret",
        "name": "ORDERS_TOKEN",
        "allowed_hosts": ["api.example.com"],
        "last_four": "zyxw",
        "updated_at": body["updated_at"],
    }
    replaced = put(api, value=VALUE + "9", hosts=("api.example.com", "backup.example.com"))
    assert replaced.status_code == 200
    assert replaced.json()["last_four"] == "yxw9"
    responses = [created, replaced, api.get("/v1/secrets/ORDERS_TOKEN"), api.get("/v1/secrets")]
    assert api.get("/v1/secrets").json()["data"][0]["name"] == "ORDERS_TOKEN"
    responses.append(api.delete("/v1/secrets/ORDERS_TOKEN"))
    responses.append(api.get("/v1/secrets/ORDERS_TOKEN"))
    assert responses[-1].status_code == 404
    for response in responses:
        assert VALUE not in response.content.decode()
        assert VALUE[:-4] not in response.content.decode()
    assert VALUE[:-4] not in everything_logged.text


@pytest.mark.django_db
def test_short_values_show_no_last_four(api):
    assert put(api, value="abc123").json()["last_four"] == ""


@pytest.mark.django_db
def test_value_is_encrypted_at_rest(api):
    put(api)
    row = Secret.objects.get(name="ORDERS_TOKEN")
    assert VALUE.encode() not in bytes(row.ciphertext)
    assert VALUE[:-4].encode() not in bytes(row.ciphertext)
    assert secret_resolve(project_id=row.project_id, name="ORDERS_TOKEN").value == VALUE


@pytest.mark.parametrize(
    ("name", "body", "code"),
    [
        ("orders_token", {"value": VALUE, "allowed_hosts": ["api.example.com"]}, "invalid_secret_name"),
        ("1TOKEN", {"value": VALUE, "allowed_hosts": ["api.example.com"]}, "invalid_secret_name"),
        ("A" * 65, {"value": VALUE, "allowed_hosts": ["api.example.com"]}, "invalid_secret_name"),
        ("TOKEN", {"value": VALUE}, "invalid_allowed_hosts"),
        ("TOKEN", {"value": VALUE, "allowed_hosts": []}, "invalid_allowed_hosts"),
        ("TOKEN", {"value": VALUE, "allowed_hosts": "api.example.com"}, "invalid_allowed_hosts"),
        ("TOKEN", {"value": VALUE, "allowed_hosts": ["https://api.example.com"]}, "invalid_allowed_hosts"),
        ("TOKEN", {"value": VALUE, "allowed_hosts": ["api.example.com:443"]}, "invalid_allowed_hosts"),
        ("TOKEN", {"value": VALUE, "allowed_hosts": ["API.EXAMPLE.COM"]}, "invalid_allowed_hosts"),
        ("TOKEN", {"value": VALUE, "allowed_hosts": [VALUE]}, "invalid_allowed_hosts"),
        ("TOKEN", {"value": VALUE, "allowed_hosts": [f"h{i}.example.com" for i in range(21)]}, "invalid_allowed_hosts"),
        ("TOKEN", {"value": "", "allowed_hosts": ["api.example.com"]}, "invalid_secret_value"),
        ("TOKEN", {"value": 12345678, "allowed_hosts": ["api.example.com"]}, "invalid_secret_value"),
        ("TOKEN", {"value": VALUE + "\r\nX-Injected: 1", "allowed_hosts": ["api.example.com"]}, "invalid_secret_value"),
        ("TOKEN", {"value": VALUE * 400, "allowed_hosts": ["api.example.com"]}, "invalid_secret_value"),
        ("TOKEN", {"value": VALUE, "allowed_hosts": ["api.example.com"], "note": VALUE}, "invalid_request"),
    ],
)
@pytest.mark.django_db
def test_bad_writes_are_refused_without_echoing_the_value(api, everything_logged, name, body, code):
    response = api.put(f"/v1/secrets/{name}", body, format="json")
    assert response.status_code == 422
    assert error(response) == code
    assert VALUE not in response.content.decode()
    assert VALUE[:-4] not in everything_logged.text
    assert Secret.objects.count() == 0


@pytest.mark.django_db
def test_ciphertext_copied_to_another_project_or_name_does_not_decrypt(alice, bob):
    put(alice.client())
    original = Secret.objects.get(project=alice.project, name="ORDERS_TOKEN")
    # Someone with database access copies the row to bob's project, and to another name in alice's.
    Secret.objects.create(
        project=bob.project, name="ORDERS_TOKEN", ciphertext=original.ciphertext, allowed_hosts=["api.example.com"]
    )
    Secret.objects.create(
        project=alice.project, name="OTHER_TOKEN", ciphertext=original.ciphertext, allowed_hosts=["api.example.com"]
    )
    with pytest.raises(crypto.DecryptionError):
        secret_resolve(project_id=bob.project.id, name="ORDERS_TOKEN")
    with pytest.raises(crypto.DecryptionError):
        secret_resolve(project_id=alice.project.id, name="OTHER_TOKEN")
    assert secret_resolve(project_id=alice.project.id, name="ORDERS_TOKEN").value == VALUE


@pytest.mark.django_db
def test_key_rotation_first_encrypts_all_decrypt(api, settings):
    old_key = settings.KAGENT_ENCRYPTION_KEYS[0]
    put(api)
    row = Secret.objects.get(name="ORDERS_TOKEN")
    new_key = base64.urlsafe_b64encode(b"n" * 32).decode()
    settings.KAGENT_ENCRYPTION_KEYS = [new_key, old_key]
    assert secret_resolve(project_id=row.project_id, name="ORDERS_TOKEN").value == VALUE
    put(api, name="NEW_TOKEN")
    settings.KAGENT_ENCRYPTION_KEYS = [new_key]
    assert secret_resolve(project_id=row.project_id, name="NEW_TOKEN").value == VALUE
    with pytest.raises(crypto.DecryptionError):
        secret_resolve(project_id=row.project_id, name="ORDERS_TOKEN")


@pytest.mark.django_db
def test_tampered_ciphertext_does_not_decrypt(api):
    put(api)
    row = Secret.objects.get(name="ORDERS_TOKEN")
    blob = bytearray(bytes(row.ciphertext))
    blob[-1] ^= 1
    Secret.objects.filter(pk=row.pk).update(ciphertext=bytes(blob))
    with pytest.raises(crypto.DecryptionError):
        secret_resolve(project_id=row.project_id, name="ORDERS_TOKEN")


@pytest.mark.django_db
def test_someone_elses_secrets_are_404(alice, bob):
    put(alice.client())
    other = bob.client()
    assert other.get("/v1/secrets/ORDERS_TOKEN").status_code == 404
    assert other.delete("/v1/secrets/ORDERS_TOKEN").status_code == 404
    assert other.get("/v1/secrets").json()["data"] == []
    assert alice.client().get("/v1/secrets/ORDERS_TOKEN").status_code == 200


@pytest.mark.parametrize(
    ("path", "purpose"), [("/v1/tool_signing_secret", "tool_signing"), ("/v1/end_user_secret", "end_user")]
)
@pytest.mark.django_db
def test_signing_secrets_rotate_with_a_24_hour_overlap(alice, bob, path, purpose):
    api = alice.client()
    first = api.get(path).json()
    assert first["secret"].startswith("whsec_")
    assert len(base64.b64decode(first["secret"].removeprefix("whsec_"))) == 32
    assert first["previous_secret_expires_at"] is None
    assert api.get(path).json()["secret"] == first["secret"]
    assert bob.client().get(path).json()["secret"] != first["secret"]

    rotated = api.post(f"{path}/rotate").json()
    assert rotated["secret"] != first["secret"]
    expires = rotated["previous_secret_expires_at"]
    assert abs(expires - (timezone.now() + timedelta(hours=24)).timestamp()) < 60
    assert api.get(path).json()["secret"] == rotated["secret"]
    assert signing_secrets_valid(project=alice.project, purpose=purpose) == [rotated["secret"], first["secret"]]

    # A day later the old one no longer signs.
    SigningSecret.objects.filter(expires_at__isnull=False).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert signing_secrets_valid(project=alice.project, purpose=purpose) == [rotated["secret"]]
    assert api.get(path).json()["previous_secret_expires_at"] is None
    # Stored encrypted.
    for row in SigningSecret.objects.all():
        assert rotated["secret"].encode() not in bytes(row.ciphertext)
