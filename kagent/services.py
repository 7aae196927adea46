"""Writes for tenancy: organizations, projects, members, API keys."""

from __future__ import annotations

import secrets
import sys
import time
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from kagent.cors import allowed_origins_parse, forget_listed
from kagent.errors import ApiError, NotFound, Unprocessable
from kagent.models import ApiKey, EgressEvent, Invitation, Membership, Organization, Project, User
from kagent.selectors import project_ids_rotated


def api_key_create(*, project: Project, kind: str, name: str = "") -> tuple[ApiKey, str]:
    """Creates a key and returns it with the raw key, which is never stored and never shown again."""
    kind = ApiKey.Kind(kind)
    raw = ApiKey.PREFIXES[kind] + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        project=project,
        kind=kind,
        name=name[:200],
        digest=ApiKey.digest_of(raw),
        hint=f"{raw[:6]}…{raw[-4:]}",
    )
    return key, raw


def api_key_revoke(*, project: Project, key_id: str) -> ApiKey:
    key = ApiKey.objects.filter(project=project, pk=key_id).first()
    if key is None:
        raise NotFound("No such API key in this project.")
    ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    key.refresh_from_db()
    transaction.on_commit(lambda: forget_listed(list(key.allowed_origins or [])))  # its origins no longer count
    return key


def api_key_origins_update(*, project: Project, key_id: str, allowed_origins: list[str]) -> ApiKey:
    """The origins whose pages may use a publishable key from a browser (CORS, kagent/cors.py), replaced whole:
    each an exact origin like https://shop.example, normalized as browsers send it (422 `invalid_allowed_origins`
    naming the entry otherwise). Secret keys have none: a browser must never hold one."""
    key = ApiKey.objects.filter(project=project, pk=key_id).first()
    if key is None:
        raise NotFound("No such API key in this project.")
    origins = allowed_origins_parse(allowed_origins)
    if key.is_secret and origins:
        message = "Only publishable keys are used from browsers: secret keys have no allowed origins."
        details = [{"path": "$.allowed_origins", "message": message}]
        raise ApiError("origins_for_publishable_keys_only", message, status=422, details=details)
    previous = list(key.allowed_origins or [])
    ApiKey.objects.filter(pk=key.pk).update(allowed_origins=origins)
    key.allowed_origins = origins
    transaction.on_commit(lambda: forget_listed(previous + origins))  # preflights see the change at once
    return key


@transaction.atomic
def bootstrap(
    *,
    org_name: str,
    project_name: str,
    email: str,
    password: str,
    new_keys: bool = False,
    allowed_origins: list[str] | None = None,
) -> dict[str, Any]:
    """Creates or reuses an organization, project and owner; creates keys when asked or when none is active.
    `allowed_origins` are added to every active publishable key of the project (the demo's own origin, so its
    widget page works).

    Keys are stored hashed, so a key made by an earlier run can't be printed again: reused keys print as null.
    """
    organization, _ = Organization.objects.get_or_create(name=org_name)
    project, _ = Project.objects.get_or_create(organization=organization, name=project_name)
    email = email.strip().lower()
    user = User.objects.filter(email=email).first()
    if user is None:
        user = User.objects.create_user(email, password)
    elif not user.check_password(password):
        user.set_password(password)
        user.save(update_fields=["password"])
    membership, created = Membership.objects.get_or_create(
        organization=organization, user=user, defaults={"role": Membership.Role.OWNER}
    )
    if not created and membership.role != Membership.Role.OWNER:
        membership.role = Membership.Role.OWNER
        membership.save(update_fields=["role"])

    raw_keys: dict[str, str | None] = {}
    for kind in (ApiKey.Kind.SECRET, ApiKey.Kind.PUBLISHABLE):
        active = ApiKey.objects.filter(project=project, kind=kind, revoked_at__isnull=True).exists()
        if new_keys or not active:
            _, raw_keys[kind] = api_key_create(project=project, kind=kind, name="bootstrap")
        else:
            raw_keys[kind] = None
    if allowed_origins:
        for key in ApiKey.objects.filter(project=project, kind=ApiKey.Kind.PUBLISHABLE, revoked_at__isnull=True):
            wanted = list(key.allowed_origins or []) + [o for o in allowed_origins if o not in key.allowed_origins]
            api_key_origins_update(project=project, key_id=key.pk, allowed_origins=wanted)

    return {
        "organization": {"id": organization.id, "name": organization.name},
        "project": {"id": project.id, "name": project.name},
        "secret_key": raw_keys[ApiKey.Kind.SECRET],
        "publishable_key": raw_keys[ApiKey.Kind.PUBLISHABLE],
        "dashboard_user": {"email": user.email},
    }


# --- members ----------------------------------------------------------------------------------------------------


def _member_problem(code: str, message: str, path: str, *, status: int = 422) -> ApiError:
    return ApiError(code, message, status=status, details=[{"path": path, "message": message}])


def member_remove(*, organization: Organization, membership_id: int, removed_by: Membership) -> None:
    """Owners and admins remove members (only owners remove owners); the last owner stays. The invitations the removed
    member sent and nobody accepted yet die with their membership (kagent/invitations.py)."""
    if removed_by.organization_id != organization.pk or not removed_by.can_manage:
        raise _member_problem("permission_denied", "Only owners and admins can remove members.", "$", status=403)
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(organization=organization, pk=membership_id).first()
        if membership is None:
            raise NotFound("No such member in this organization.")
        if membership.role == Membership.Role.OWNER:
            if removed_by.role != Membership.Role.OWNER:
                raise _member_problem("permission_denied", "Only owners can remove owners.", "$", status=403)
            owners = Membership.objects.filter(organization=organization, role=Membership.Role.OWNER).count()
            if owners <= 1:
                raise _member_problem("last_owner", "An organization keeps at least one owner.", "$", status=409)
        Invitation.objects.filter(
            organization=organization, invited_by_id=membership.user_id, accepted_at__isnull=True
        ).delete()
        membership.delete()


def limit_ceilings() -> dict[str, int]:
    """The most a project may set its own limits to: the operator's (second security review, item 8)."""
    return {
        "api_rate_secret": settings.KAGENT_MAX_API_RATE_SECRET,
        "api_rate_publishable": settings.KAGENT_MAX_API_RATE_PUBLISHABLE,
        "run_rate_publishable": settings.KAGENT_MAX_RUN_RATE_PUBLISHABLE,
    }


def project_limits_update(
    *,
    project: Project,
    api_rate_secret: int | None,
    api_rate_publishable: int | None,
    run_rate_publishable: int | None,
) -> Project:
    """The project's own request limits a minute (None: the defaults of the settings), under the operator's
    ceilings (422 `limit_too_high`)."""
    values = {
        "api_rate_secret": api_rate_secret,
        "api_rate_publishable": api_rate_publishable,
        "run_rate_publishable": run_rate_publishable,
    }
    for name, ceiling in limit_ceilings().items():
        value = values[name]
        if value is not None and not 1 <= value <= ceiling:
            raise Unprocessable(
                "limit_too_high",
                f"{name} is from 1 to {ceiling} a minute on this service.",
                details=[{"path": f"$.{name}", "message": f"from 1 to {ceiling}"}],
            )
    Project.objects.filter(pk=project.pk).update(**values)
    for name, value in values.items():
        setattr(project, name, value)
    return project


EXPIRE_BUDGET_S = 120.0  # a housekeeping pass's time (beat runs one every 10 minutes; the task's limit is 300 s)


def egress_events_expire(
    *, before: datetime, batch: int = 1000, limit: int | None = None, budget_s: float = EXPIRE_BUDGET_S
) -> int:
    """Deletes egress log rows created before `before`, `batch` a statement, each project's oldest first (its
    (project, created_at) index; the operator's own calls, of no project, too), the projects from a random one on,
    until none is left, `limit` are deleted or `budget_s` has passed."""
    deadline = time.monotonic() + budget_s
    limit = limit if limit is not None else sys.maxsize
    deleted = 0
    for project_id in [None, *project_ids_rotated()]:
        rows = EgressEvent.objects.filter(created_at__lt=before)
        rows = rows.filter(project__isnull=True) if project_id is None else rows.filter(project_id=project_id)
        while deleted < limit and time.monotonic() < deadline:
            ids = list(rows.order_by("created_at").values_list("pk", flat=True)[: min(batch, limit - deleted)])
            if ids:
                EgressEvent.objects.filter(pk__in=ids).delete()
                deleted += len(ids)
            if len(ids) < batch:
                break
        if deleted >= limit or time.monotonic() >= deadline:
            break
    return deleted
