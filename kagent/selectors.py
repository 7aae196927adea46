"""Reads for tenancy. Every tenant read takes the project (or the user whose memberships bound it)."""

from __future__ import annotations

from django.db.models import QuerySet

from kagent.models import ApiKey, Membership, Project, User


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
