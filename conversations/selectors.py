"""Reads for conversations. Every read takes the project; a publishable key (`key`) sees only what it created,
while the project's secret key and its dashboard (`key=None`) see all of the project's. A publishable key reads a
verified end user's session (or run: runs/selectors.py) only with that user's `end_user_token` (else it is a 404: a
browser that holds the key but not the user's token learns nothing)."""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from django.db.models import Model, QuerySet

from conversations.identity import token_external_id
from conversations.models import EndUser, Message, Session
from kagent.errors import NotFound
from kagent.models import ApiKey, Project
from kagent.selectors import filter_given

M = TypeVar("M", bound=Model)


def visible(
    queryset: QuerySet[M], key: ApiKey | None, project: Project | None = None, end_user_token: str | None = None
) -> QuerySet[M]:
    """What `key` may list of a queryset of sessions or runs: everything for a secret key or the dashboard; for a
    publishable key what it created for the verified end user whose token it sends, and nothing without one."""
    if key is None or key.is_secret:
        return queryset
    # Every visitor of the business's site holds the publishable key: a list of what the key made would show each
    # visitor everyone's anonymous conversations. A publishable key lists one verified end user's, with their token.
    subject = token_external_id(project, end_user_token) if project is not None and end_user_token else None
    if subject is None:
        return queryset.none()
    return queryset.filter(created_by_key=key, end_user__external_id=subject)


def token_proves(project: Project, key: ApiKey | None, end_user: EndUser | None, token: str | None) -> bool:
    """Whether the caller may see an object of `end_user`: always with a secret key or the dashboard, and for a
    publishable key only with a valid token of that very user."""
    if key is None or key.is_secret or end_user is None:
        return True
    return token is not None and token_external_id(project, token) == end_user.external_id


def session_get(
    *,
    project: Project,
    session_id: str,
    key: ApiKey | None = None,
    end_user_token: str | None = None,
    check_end_user: bool = True,
) -> Session:
    """`check_end_user=False` is for run creation, which checks the token itself and says what is wrong."""
    sessions = Session.objects.filter(project=project, pk=session_id)
    if key is not None and not key.is_secret:
        sessions = sessions.filter(created_by_key=key)
    session = sessions.select_related("end_user").first()
    if session is None or (check_end_user and not token_proves(project, key, session.end_user, end_user_token)):
        raise NotFound("No session with that id in this project.")
    return session


def session_messages(*, session: Session) -> QuerySet[Message]:
    return Message.objects.filter(session=session, project_id=session.project_id)


SESSION_STATUSES = ("open", "handed_off", "closed")


def session_list(
    *,
    project: Project,
    key: ApiKey | None = None,
    end_user_token: str | None = None,
    agent_id: str | None = None,
    status: str | None = None,
    flagged: bool | None = None,
    end_user: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    include_tests: bool = False,
) -> QuerySet[Session]:
    """The project's sessions, filtered (`status=handed_off&flagged=true`: what needs a person). Test-panel
    sessions only with `include_tests`."""
    return filter_given(
        visible(Session.objects.filter(project=project), key, project, end_user_token).select_related(
            "agent", "end_user"
        ),
        is_test=None if include_tests else False,
        agent_id=agent_id,
        status=status,
        flagged=flagged,
        end_user__external_id=end_user,
        created_at__gt=created_after,
        created_at__lt=created_before,
    )


def session_status(session: Session) -> str:
    """`open`, `handed_off` (while a handoff of it is open) or `closed` (the team closed its last handoff)."""
    return session.status
