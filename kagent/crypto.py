"""Encryption at rest for tenant secrets (AES-256-GCM, keys from KAGENT_ENCRYPTION_KEYS).

The first key encrypts; every key decrypts (rotation). Each ciphertext is bound to what it protects (for a secret:
its project and name) as GCM associated data, so a row copied to another project or name does not decrypt.
Layout: b"\x01" | key id (4 bytes) | nonce (12 bytes) | ciphertext+tag.
"""

from __future__ import annotations

import base64
import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

_VERSION = b"\x01"


class DecryptionError(Exception):
    """The ciphertext was not made by any configured key for this binding."""


def _keys() -> list[tuple[bytes, AESGCM]]:
    out = []
    for encoded in settings.KAGENT_ENCRYPTION_KEYS:
        raw = base64.urlsafe_b64decode(encoded.encode())
        out.append((hashlib.sha256(raw).digest()[:4], AESGCM(raw)))
    return out


def encrypt(plaintext: str, *, binding: str) -> bytes:
    key_id, aead = _keys()[0]
    nonce = os.urandom(12)
    return _VERSION + key_id + nonce + aead.encrypt(nonce, plaintext.encode(), binding.encode())


def decrypt(blob: bytes, *, binding: str) -> str:
    blob = bytes(blob)
    if len(blob) < 1 + 4 + 12 + 16 or blob[:1] != _VERSION:
        raise DecryptionError("not a K-Agent ciphertext")
    key_id, nonce, body = blob[1:5], blob[5:17], blob[17:]
    for candidate_id, aead in _keys():
        if candidate_id != key_id:
            continue
        try:
            return aead.decrypt(nonce, body, binding.encode()).decode()
        except InvalidTag:
            break
    raise DecryptionError("ciphertext does not decrypt with the configured keys for this binding")
