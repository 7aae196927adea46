"""Reads of checks and check runs: each takes the agent (itself the project's)."""

from __future__ import annotations

from django.db.models import QuerySet

from agents.models import Agent
from checks.models import Check, CheckRun
from kagent.errors import NotFound


def check_list(*, agent: Agent) -> QuerySet[Check]:
    return Check.objects.filter(agent=agent)


def check_get(*, agent: Agent, check_id: str) -> Check:
    check = check_list(agent=agent).filter(pk=check_id).first()
    if check is None:
        raise NotFound("No check with that id for this agent.")
    return check


def check_run_get(*, agent: Agent, check_run_id: str) -> CheckRun:
    check_run = CheckRun.objects.filter(agent=agent, pk=check_run_id).first()
    if check_run is None:
        raise NotFound("No check run with that id for this agent.")
    return check_run
