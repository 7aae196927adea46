"""Reads for sessions, runs and the desk. Every read takes the project; a publishable key (`key`) sees only what it
created, while the project's secret key and its dashboard (`key=None`) see all of the project's."""

from __future__ import annotations

from typing import TypeVar

from django.db.models import Model, QuerySet

from kagent.errors import NotFound
from kagent.models import ApiKey, Project
from runs.models import Handoff, Message, Run, RunStep, Session, Ticket, ToolCall

M = TypeVar("M", bound=Model)


def _visible(queryset: QuerySet[M], key: ApiKey | None) -> QuerySet[M]:
    return queryset if key is None or key.is_secret else queryset.filter(created_by_key=key)


def session_get(*, project: Project, session_id: str, key: ApiKey | None = None) -> Session:
    sessions = _visible(Session.objects.filter(project=project, pk=session_id), key)
    session = sessions.select_related("end_user").first()
    if session is None:
        raise NotFound("No session with that id in this project.")
    return session


def session_messages(*, session: Session) -> QuerySet[Message]:
    return Message.objects.filter(session=session, project_id=session.project_id)


def run_get(*, project: Project, run_id: str, key: ApiKey | None = None) -> Run:
    run = _visible(Run.objects.filter(project=project, pk=run_id), key).first()
    if run is None:
        raise NotFound("No run with that id in this project.")
    return run


def run_steps(*, run: Run) -> tuple[list[RunStep], list[ToolCall]]:
    return list(run.steps.order_by("created_at", "pk")), list(run.tool_calls.order_by("round", "index"))


# --- the desk -------------------------------------------------------------------------------------------------


def ticket_list(*, project: Project, status: str | None = None, include_tests: bool = False) -> QuerySet[Ticket]:
    """Test-panel tickets stay off the default views."""
    tickets = Ticket.objects.filter(project=project).select_related("end_user")
    if status is not None:
        tickets = tickets.filter(status=status)
    return tickets if include_tests else tickets.filter(is_test=False)


def ticket_get(*, project: Project, ticket_id: str) -> Ticket:
    ticket = Ticket.objects.filter(project=project, pk=ticket_id).select_related("end_user").first()
    if ticket is None:
        raise NotFound("No ticket with that id in this project.")
    return ticket


def handoff_list(*, project: Project, status: str | None = None, include_tests: bool = False) -> QuerySet[Handoff]:
    """Test-panel handoffs stay off the default views."""
    handoffs = Handoff.objects.filter(project=project).select_related("end_user")
    if status is not None:
        handoffs = handoffs.filter(status=status)
    return handoffs if include_tests else handoffs.filter(is_test=False)
