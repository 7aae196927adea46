"""Reads of the desk. Every read takes the project. The desk's lists and objects for the API and the dashboard
(test-panel objects stay off the default views), and what the run engine asks of a customer's desk: the policy
check's ticket rules (SPEC §5 step 4 and 7) and the truthfulness guard's facts (a ticket number or a handoff a
reply may name). A customer is the bucket the policy check's limits count against (a run's `rate_key`)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from desk.models import Handoff, Ticket
from kagent.errors import NotFound
from kagent.models import Project

# --- the desk's objects -------------------------------------------------------------------------------------------


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


def handoff_get(*, project: Project, handoff_id: str) -> Handoff:
    handoff = Handoff.objects.filter(project=project, pk=handoff_id).select_related("end_user").first()
    if handoff is None:
        raise NotFound("No handoff with that id in this project.")
    return handoff


# --- what a run asks of its customer's desk (test-panel runs see only test objects) -----------------------------


def customer_open_ticket(*, project_id: str, rate_key: str, is_test: bool) -> Ticket | None:
    """The customer's newest open ticket: `create_ticket` opens no second one (one open agent ticket each)."""
    return (
        Ticket.objects.filter(project_id=project_id, rate_key=rate_key, status=Ticket.Status.OPEN, is_test=is_test)
        .order_by("-created_at")
        .first()
    )


def customer_tickets_since(*, project_id: str, rate_key: str, is_test: bool, since: datetime) -> int:
    """How many tickets the customer's runs opened since `since` (`create_ticket`'s daily limit)."""
    return Ticket.objects.filter(
        project_id=project_id, rate_key=rate_key, is_test=is_test, created_at__gte=since
    ).count()


def customer_ticket_numbers(*, project_id: str, rate_key: str, is_test: bool, limit: int = 200) -> list[int]:
    """The numbers of the customer's tickets, open or closed (at most `limit`): "your ticket TKT-3" is true later."""
    earlier = Ticket.objects.filter(project_id=project_id, rate_key=rate_key, is_test=is_test)
    return list(earlier.values_list("number", flat=True)[:limit])


def session_handed_off(*, project_id: str, session_id: str) -> bool:
    """Whether a handoff of the session is open: the conversation is with the team."""
    return Handoff.objects.filter(project_id=project_id, session_id=session_id, status=Handoff.Status.OPEN).exists()
