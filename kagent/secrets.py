"""Tenant secrets (write-only, encrypted at rest) and the project's signing secrets (`whsec_…`, rotated)."""

from __future__ import annotations

import base64
import re
import secrets as random
import time
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from kagent import crypto
from kagent.errors import NotFound, Unprocessable
from kagent.models import Project, Secret, SigningSecret

# linear: anchored, one class, at most 64 characters
SECRET_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}(?!\n)$")
# linear: anchored; each label starts on a literal dot its class excludes, at most 63 characters
HOSTNAME_RE = re.compile(r"^(?=.{1,253}(?!\n)$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+(?!\n)$")
MAX_VALUE = 8192
MAX_HOSTS = 20
ROTATION_OVERLAP = timedelta(hours=24)
# The last four characters are shown only when they don't give away a meaningful part of the value.
LAST_FOUR_MIN_LENGTH = 12


@dataclass(frozen=True)
class SecretValue:
    value: str
    allowed_hosts: tuple[str, ...]


def _refuse(code: str, message: str, path: str) -> Unprocessable:
    return Unprocessable(code, message, details=[{"path": path, "message": message}])


def check_secret_name(name: str) -> None:
    if not SECRET_NAME_RE.match(name):
        raise _refuse(
            "invalid_secret_name",
            "A secret's name starts with a capital letter and has only capital letters, digits and _ (at most 64), "
            "like ORDERS_TOKEN.",
            "$.name",
        )


def secret_put(*, project: Project, name: str, value: str, allowed_hosts: list[str]) -> tuple[Secret, bool]:
    """Creates or replaces a secret. Returns (secret, created). Error messages never contain the value."""
    check_secret_name(name)
    hosts = list(dict.fromkeys(allowed_hosts))
    ciphertext = crypto.encrypt(value, binding=Secret.binding(project.id, name))
    last_four = value[-4:] if len(value) >= LAST_FOUR_MIN_LENGTH else ""
    now = timezone.now()
    with transaction.atomic():
        updated = Secret.objects.filter(project=project, name=name).update(
            ciphertext=ciphertext, last_four=last_four, allowed_hosts=hosts, updated_at=now
        )
        if updated:
            return Secret.objects.get(project=project, name=name), False
        try:
            with transaction.atomic():
                secret = Secret.objects.create(
                    project=project,
                    name=name,
                    ciphertext=ciphertext,
                    last_four=last_four,
                    allowed_hosts=hosts,
                    created_at=now,
                    updated_at=now,
                )
            return secret, True
        except IntegrityError:  # created by a concurrent request a moment ago: replace it
            Secret.objects.filter(project=project, name=name).update(
                ciphertext=ciphertext, last_four=last_four, allowed_hosts=hosts, updated_at=now
            )
            return Secret.objects.get(project=project, name=name), False


def secret_list(*, project: Project) -> QuerySet[Secret]:
    return Secret.objects.filter(project=project)


def secret_get(*, project: Project, name: str) -> Secret:
    secret = Secret.objects.filter(project=project, name=name).first()
    if secret is None:
        raise NotFound("No secret with that name in this project.")
    return secret


def secret_delete(*, project: Project, name: str) -> None:
    deleted, _ = Secret.objects.filter(project=project, name=name).delete()
    if not deleted:
        raise NotFound("No secret with that name in this project.")


def secret_resolve(*, project_id: str, name: str) -> SecretValue | None:
    """The decrypted value for a call, or None if there is no such secret (the call then fails closed)."""
    secret = Secret.objects.filter(project_id=project_id, name=name).first()
    if secret is None:
        return None
    value = crypto.decrypt(bytes(secret.ciphertext), binding=Secret.binding(project_id, name))
    return SecretValue(value=value, allowed_hosts=tuple(secret.allowed_hosts))


def secret_allowed_hosts(*, project: Project, name: str) -> list[str] | None:
    secret = Secret.objects.filter(project=project, name=name).only("allowed_hosts").first()
    return None if secret is None else list(secret.allowed_hosts)


# --- signing secrets -------------------------------------------------------------------------------


def _new_whsec() -> str:
    return "whsec_" + base64.b64encode(random.token_bytes(32)).decode()


def _valid_signing_rows(project: Project, purpose: str) -> QuerySet[SigningSecret]:
    now = timezone.now()
    return SigningSecret.objects.filter(project=project, purpose=purpose).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )


def _decrypt_row(row: SigningSecret) -> str:
    return crypto.decrypt(bytes(row.ciphertext), binding=row.binding())


def signing_secret_current(*, project: Project, purpose: str) -> tuple[str, SigningSecret]:
    """The current secret (created on first use) and its row."""
    row = _valid_signing_rows(project, purpose).filter(expires_at__isnull=True).order_by("-created_at").first()
    if row is None:
        with transaction.atomic():
            Project.objects.select_for_update().get(pk=project.pk)  # one creator per project
            row = _valid_signing_rows(project, purpose).filter(expires_at__isnull=True).order_by("-created_at").first()
            if row is None:
                row = SigningSecret(project=project, purpose=purpose)
                row.ciphertext = crypto.encrypt(_new_whsec(), binding=row.binding())
                row.save()
    return _decrypt_row(row), row


def signing_secret_rotate(*, project: Project, purpose: str) -> str:
    """A new current secret; the previous one stays valid for 24 hours."""
    with transaction.atomic():
        Project.objects.select_for_update().get(pk=project.pk)
        SigningSecret.objects.filter(project=project, purpose=purpose, expires_at__isnull=True).update(
            expires_at=timezone.now() + ROTATION_OVERLAP
        )
        row = SigningSecret(project=project, purpose=purpose)
        secret = _new_whsec()
        row.ciphertext = crypto.encrypt(secret, binding=row.binding())
        row.save()
    _signing_cache.pop((project.pk, purpose), None)  # this process signs with the new one at once
    return secret


def signing_secrets_valid(*, project: Project, purpose: str) -> list[str]:
    """Every secret that signs (and verifies) now, newest first: two during a rotation's overlap."""
    rows = list(_valid_signing_rows(project, purpose).order_by("-created_at"))
    if not any(row.expires_at is None for row in rows):  # none yet: make the current one
        signing_secret_current(project=project, purpose=purpose)
        rows = list(_valid_signing_rows(project, purpose).order_by("-created_at"))
    return [_decrypt_row(row) for row in rows]


# Per process, for the secrets that sign outbound calls: a run's HTTP tool calls would otherwise read and decrypt them
# on every call. A stale entry is harmless for up to a minute: after a rotation the previous secret keeps signing (and
# verifying) for 24 hours, and the business verifies with either.
SIGNING_CACHE_SECONDS = 60.0
_signing_cache: dict[tuple[str, str], tuple[float, list[str]]] = {}


def signing_secrets_for_calls(project_id: str, purpose: str) -> list[str]:
    """`signing_secrets_valid`, remembered for a minute per process."""
    key = (project_id, purpose)
    now = time.monotonic()
    cached = _signing_cache.get(key)
    if cached is not None and now - cached[0] < SIGNING_CACHE_SECONDS:
        return cached[1]
    project = Project(pk=project_id)
    secrets = signing_secrets_valid(project=project, purpose=purpose)
    if len(_signing_cache) > 10_000:  # a worker serving very many projects: start over rather than grow
        _signing_cache.clear()
    _signing_cache[key] = (now, secrets)
    return secrets


def signing_secret_previous_expiry(*, project: Project, purpose: str) -> int | None:
    row = _valid_signing_rows(project, purpose).filter(expires_at__isnull=False).order_by("-expires_at").first()
    return int(row.expires_at.timestamp()) if row and row.expires_at else None
