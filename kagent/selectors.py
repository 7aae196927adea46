"""Reads for tenancy. Every tenant read takes the project (or the user whose memberships bound it)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from kagent.models import ApiKey, EgressEvent, Membership, Organization, Project, User

M = TypeVar("M", bound=Model)


def filter_given(queryset: QuerySet[M], **lookups: Any) -> QuerySet[M]:
    """`queryset` filtered by each lookup that was given (not None): a list's optional filters in one line."""
    return queryset.filter(**{lookup: value for lookup, value in lookups.items() if value is not None})


def project_list_for_user(*, user: User) -> QuerySet[Project]:
    return (
        Project.objects.filter(organization__memberships__user=user)
        .select_related("organization")
        .order_by("organization__name", "name")
    )


def membership_for_project(*, user: User, project_id: str) -> Membership | None:
    """The user's membership in the project's organization, or None: a project they can't see is a 404."""
    return (
        Membership.objects.filter(user=user, organization__projects__id=project_id)
        .select_related("organization")
        .first()
    )


def api_key_list(*, project: Project) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(project=project).order_by("-created_at")


def egress_event_list(
    *,
    project: Project,
    decision: str | None = None,
    purpose: str | None = None,
    host: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> QuerySet[EgressEvent]:
    """Every outbound call and refusal of the project, filtered."""
    return filter_given(
        EgressEvent.objects.filter(project=project),
        decision=decision,
        purpose=purpose,
        host=host,
        created_at__gt=created_after,
        created_at__lt=created_before,
    )


def member_list(*, organization: Organization) -> QuerySet[Membership]:
    return Membership.objects.filter(organization=organization).select_related("user").order_by("created_at", "pk")


def project_ids_rotated() -> Iterator[str]:
    """Every project's id once, from a random one on and around: a housekeeping pass that stops on its budget leaves
    different projects for the next one, never always the same."""
    ids = Project.objects.order_by("pk").values_list("pk", flat=True)
    count = ids.count()
    if not count:
        return
    start = ids[random.randrange(count)]
    yield from ids.filter(pk__gte=start).iterator()
    yield from ids.filter(pk__lt=start).iterator()
