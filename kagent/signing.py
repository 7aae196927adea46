"""Standard Webhooks signing for every call K-Agent makes to a tenant URL (seed "HTTP tools", SPEC §6 "Signing").

The `standardwebhooks` package signs; the business verifies with any Standard Webhooks library. During a rotation
two secrets are valid and the call carries one `v1,…` signature per secret, space-separated, newest first, so a
receiver holding either secret accepts it.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from standardwebhooks import Webhook

# linear: anchored, one class, bounded
_MESSAGE_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,255}(?!\n)$")


class SigningError(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _webhook(secret: str) -> Webhook:
    if not isinstance(secret, str) or not secret.startswith("whsec_"):
        raise SigningError("invalid_signing_secret", "signing secrets look like whsec_<base64>")
    try:
        encoded = secret[len("whsec_") :].rstrip("=")
        if not base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True):
            raise ValueError("empty secret")
        return Webhook(secret)
    except Exception as exc:  # noqa: BLE001 - binascii.Error, EmptyWebhookSecretError (a bare Exception)...
        raise SigningError("invalid_signing_secret", "the signing secret is not valid base64") from exc


def webhook_headers(
    *, secrets: Sequence[str], message_id: str, timestamp: int | datetime, body: bytes
) -> dict[str, str]:
    """`webhook-id`, `webhook-timestamp` and `webhook-signature` for `body`, signed with every secret in `secrets`.

    `secrets`: the currently valid `whsec_…` secrets, newest first (two during a rotation).
    `message_id`: stable across retries of the same call (a tool call's id), so the receiver can deduplicate.
    `timestamp`: Unix seconds (or an aware datetime) of this attempt.
    """
    if not secrets:
        raise SigningError("no_signing_secret", "there is no signing secret to sign with")
    if not isinstance(message_id, str) or not _MESSAGE_ID_RE.match(message_id):
        raise SigningError("invalid_message_id", "message ids are 1-255 characters of letters, digits and _.:-")
    if isinstance(timestamp, datetime):
        if timestamp.tzinfo is None:
            raise SigningError("invalid_timestamp", "the timestamp must be timezone-aware")
        when = timestamp.astimezone(UTC)
    elif isinstance(timestamp, int) and not isinstance(timestamp, bool) and timestamp >= 0:
        when = datetime.fromtimestamp(timestamp, tz=UTC)
    else:
        raise SigningError("invalid_timestamp", "the timestamp must be Unix seconds")
    try:
        payload = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SigningError("body_not_utf8", "only UTF-8 bodies can be signed") from exc
    signatures = [_webhook(secret).sign(msg_id=message_id, timestamp=when, data=payload) for secret in secrets]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": " ".join(signatures),
    }
