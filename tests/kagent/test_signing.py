"""Standard Webhooks signing: the package's known-answer vector, rotation, and an independent verifier."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from kagent.signing import SigningError, webhook_headers
from tests.plugins.egress import SIGNING_SECRET_NEW, SIGNING_SECRET_OLD


def independent_verify(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """The Standard Webhooks scheme written out by hand (no `standardwebhooks` code involved)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        version == "v1" and hmac.compare_digest(sig, expected)
        for version, _, sig in (part.partition(",") for part in headers["webhook-signature"].split(" "))
    )


def test_known_answer_vector_from_the_package():
    headers = webhook_headers(
        secrets=["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
        message_id="msg_p5jXN8AQM9LWM0D4loKWxJek",
        timestamp=1614265330,
        body=b'{"test": 2432232314}',
    )
    assert headers == {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }


def test_rotation_signs_with_both_secrets_and_either_verifies():
    body = '{"order": "8812", "note": "مرحبا"}'.encode()
    headers = webhook_headers(
        secrets=[SIGNING_SECRET_NEW, SIGNING_SECRET_OLD], message_id="call_4kq7", timestamp=int(time.time()), body=body
    )
    signatures = headers["webhook-signature"].split(" ")
    assert len(signatures) == 2 and all(s.startswith("v1,") for s in signatures)
    for secret in (SIGNING_SECRET_NEW, SIGNING_SECRET_OLD):
        Webhook(secret).verify(body, headers, json_parse=False)  # the package
        assert independent_verify(secret, headers, body)  # and by hand
    other = "whsec_" + base64.b64encode(b"someone else's secret").decode()
    with pytest.raises(WebhookVerificationError):
        Webhook(other).verify(body, headers, json_parse=False)
    assert not independent_verify(other, headers, body)


def test_tampered_body_fails_verification():
    headers = webhook_headers(secrets=[SIGNING_SECRET_NEW], message_id="call_1", timestamp=int(time.time()), body=b"{}")
    with pytest.raises(WebhookVerificationError):
        Webhook(SIGNING_SECRET_NEW).verify(b'{"x":1}', headers, json_parse=False)


def test_empty_body_and_datetime_timestamp():
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    headers = webhook_headers(secrets=[SIGNING_SECRET_NEW], message_id="call_x", timestamp=when, body=b"")
    assert headers["webhook-timestamp"] == str(int(when.timestamp()))
    assert independent_verify(SIGNING_SECRET_NEW, headers, b"")


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"secrets": []}, "no_signing_secret"),
        ({"secrets": ["not-a-secret"]}, "invalid_signing_secret"),
        ({"secrets": ["whsec_"]}, "invalid_signing_secret"),
        ({"secrets": ["whsec_!!!notbase64"]}, "invalid_signing_secret"),
        ({"message_id": ""}, "invalid_message_id"),
        ({"message_id": "call 1"}, "invalid_message_id"),
        ({"message_id": "call\r\nX-Evil: 1"}, "invalid_message_id"),
        ({"message_id": "x" * 256}, "invalid_message_id"),
        ({"timestamp": -1}, "invalid_timestamp"),
        ({"timestamp": True}, "invalid_timestamp"),
        ({"timestamp": datetime(2026, 1, 1)}, "invalid_timestamp"),  # naive
        ({"body": b"\xff\xfe"}, "body_not_utf8"),
    ],
)
def test_refusals(kwargs, code):
    params = {"secrets": [SIGNING_SECRET_NEW], "message_id": "call_1", "timestamp": 1_700_000_000, "body": b"{}"}
    params.update(kwargs)
    with pytest.raises(SigningError) as info:
        webhook_headers(**params)
    assert info.value.code == code
