"""Tenancy: organizations, projects, members and API keys (SPEC §3)."""

from __future__ import annotations

import hashlib
from typing import ClassVar

from django.contrib.auth.base_user import AbstractBaseUser, BaseUserManager
from django.contrib.auth.models import PermissionsMixin
from django.db import models
from django.utils import timezone

from kagent.ids import PrefixedIdField


class UserManager(BaseUserManager["User"]):
    use_in_migrations = True

    def create_user(self, email: str, password: str | None = None, **extra: object) -> User:
        if not email:
            raise ValueError("email is required")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_superuser(self, email: str, password: str | None = None, **extra: object) -> User:
        extra.setdefault("is_staff", True)
        extra.setdefault("is_superuser", True)
        return self.create_user(email, password, **extra)


class User(AbstractBaseUser, PermissionsMixin):
    """A dashboard user; signs in with email and password."""

    email = models.EmailField(unique=True)
    name = models.CharField(max_length=200, blank=True)
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False)
    date_joined = models.DateTimeField(default=timezone.now)

    objects = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: ClassVar[list[str]] = []

    def __str__(self) -> str:
        return self.email


class Organization(models.Model):
    id = PrefixedIdField(prefix="org")
    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    id = PrefixedIdField(prefix="proj")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    # The project's own request limits (per minute; null: the defaults in settings, KAGENT_API_RATE_*).
    api_rate_secret = models.PositiveIntegerField(null=True, blank=True)
    api_rate_publishable = models.PositiveIntegerField(null=True, blank=True)
    run_rate_publishable = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="project_name_unique_in_org")]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        ADMIN = "admin"
        MEMBER = "member"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "user"], name="one_membership_per_org")]

    @property
    def can_manage(self) -> bool:
        return self.role in (self.Role.OWNER, self.Role.ADMIN)


class ApiKey(models.Model):
    """A project credential. Only a SHA-256 digest of the key is stored; the key itself is shown once."""

    class Kind(models.TextChoices):
        SECRET = "secret"
        PUBLISHABLE = "publishable"

    PREFIXES = {Kind.SECRET: "ka_sk_", Kind.PUBLISHABLE: "ka_pk_"}

    id = PrefixedIdField(prefix="key")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    name = models.CharField(max_length=200, blank=True)
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=20, help_text="the key's prefix and last four characters, for display")
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Publishable keys only: the exact origins (`https://shop.example`) whose pages may call the API with this key
    # from a browser (CORS, kagent/cors.py). Empty: no page may.
    allowed_origins = models.JSONField(default=list, blank=True)

    @staticmethod
    def digest_of(raw_key: str) -> str:
        # Keys carry 256 random bits, so a plain hash is enough: nothing to brute-force.
        return hashlib.sha256(raw_key.encode()).hexdigest()

    @property
    def is_secret(self) -> bool:
        return self.kind == self.Kind.SECRET

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Secret(models.Model):
    """A write-only tenant secret for `{{secret.NAME}}`; sent only to hosts in `allowed_hosts`."""

    id = PrefixedIdField(prefix="sec")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=64)
    ciphertext = models.BinaryField()
    last_four = models.CharField(max_length=4)
    allowed_hosts = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="secret_name_unique_in_project")]

    @staticmethod
    def binding(project_id: str, name: str) -> str:
        return f"secret:{project_id}:{name}"


class SigningSecret(models.Model):
    """The project's tool signing secret and end-user token secret (`whsec_…`), with rotation.

    The current secret has `expires_at` null; a rotated one keeps signing/verifying until `expires_at`.
    """

    class Purpose(models.TextChoices):
        TOOL_SIGNING = "tool_signing"
        END_USER = "end_user"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="signing_secrets")
    purpose = models.CharField(max_length=20, choices=Purpose.choices)
    ciphertext = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["project", "purpose", "expires_at"])]

    def binding(self) -> str:
        return f"signing:{self.project_id}:{self.purpose}"


class EgressEvent(models.Model):
    """One attempt of the hardened outbound client: a call made, or a call refused. Never holds secret values."""

    class Decision(models.TextChoices):
        ALLOWED = "allowed"
        REFUSED = "refused"

    # Covered by the (project, -created_at) index in Meta.
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="egress_events", null=True, db_index=False
    )
    purpose = models.CharField(max_length=30, help_text="http_tool, knowledge, webhook, model")
    method = models.CharField(max_length=10)
    host = models.CharField(max_length=255)
    port = models.IntegerField(null=True)
    path = models.CharField(max_length=500, blank=True, help_text="path only; no query string (may hold values)")
    resolved_address = models.CharField(max_length=64, blank=True)
    decision = models.CharField(max_length=10, choices=Decision.choices)
    code = models.CharField(max_length=40, blank=True, help_text="why it was refused or failed")
    status = models.IntegerField(null=True)
    bytes_received = models.IntegerField(default=0)
    duration_ms = models.IntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["project", "-created_at"])]


class Invitation(models.Model):
    """An invitation to join an organization, by email (kagent/invitations.py). Only a SHA-256 digest of its token is
    stored: the token is in the link mailed to the invitee and nowhere else. One pending invitation per address and
    organization; sending it again replaces its token (the old link stops working)."""

    id = PrefixedIdField(prefix="inv")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=10, choices=Membership.Role.choices)
    invited_by = models.ForeignKey(User, on_delete=models.SET_NULL, null=True, related_name="+")
    token_digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "email"],
                condition=models.Q(accepted_at__isnull=True),
                name="one_pending_invitation_per_address",
            )
        ]

    @staticmethod
    def digest_of(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()
