"""Reads for sessions and runs. A publishable key reads only what it created."""

from __future__ import annotations

from django.db.models import QuerySet

from kagent.errors import NotFound
from kagent.models import ApiKey, Project
from runs.models import Message, Run, RunStep, Session, ToolCall


def _own(queryset: QuerySet, api_key: ApiKey) -> QuerySet:
    return queryset if api_key.is_secret else queryset.filter(created_by_key=api_key)


def session_get(*, project: Project, api_key: ApiKey, session_id: str) -> Session:
    session = _own(Session.objects.filter(project=project, pk=session_id), api_key).select_related("end_user").first()
    if session is None:
        raise NotFound("No session with that id in this project.")
    return session


def session_messages(*, session: Session) -> QuerySet[Message]:
    return Message.objects.filter(session=session, project_id=session.project_id)


def run_get(*, project: Project, api_key: ApiKey, run_id: str) -> Run:
    run = _own(Run.objects.filter(project=project, pk=run_id), api_key).first()
    if run is None:
        raise NotFound("No run with that id in this project.")
    return run


def run_steps(*, run: Run) -> tuple[list[RunStep], list[ToolCall]]:
    return list(run.steps.order_by("created_at", "pk")), list(run.tool_calls.order_by("round", "index"))
