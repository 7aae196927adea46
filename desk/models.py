"""The desk: what the business's team does with a conversation. Tickets (numbered `TKT-<n>` per project), handoffs
(a conversation in the team's queue) and the per-project ticket counter.

These tables were made by `runs` and keep their names (`runs_ticket`, `runs_handoff`, `runs_ticketcounter`) and
their constraints: the desk moved into its own app by state only (desk/migrations/0001_initial.py). A desk row
refers to the conversation it is about (the session, the run that made it, the end user), which `runs` owns.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from conversations.models import EndUser, Session
from kagent.ids import PrefixedIdField
from kagent.models import Project
from runs.models import Run


class Ticket(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    id = PrefixedIdField(prefix="tkt")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tickets")
    number = models.IntegerField()
    title = models.CharField(max_length=200)
    description = models.TextField()
    priority = models.CharField(max_length=10, default="normal")
    resolution_attempted = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    closed_at = models.DateTimeField(null=True, blank=True)
    end_user = models.ForeignKey(EndUser, on_delete=models.SET_NULL, null=True, blank=True)
    session = models.ForeignKey(Session, on_delete=models.SET_NULL, null=True, blank=True)
    run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True)
    # The customer's bucket of the policy check's limits (runs/services.py `_rate_key`): one open agent ticket each.
    rate_key = models.CharField(max_length=100)
    tool_call_id = models.CharField(max_length=40, unique=True, null=True, blank=True)
    is_test = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "runs_ticket"
        constraints = [models.UniqueConstraint(fields=["project", "number"], name="ticket_number_unique")]

    @property
    def display_number(self) -> str:
        return f"TKT-{self.number}"


class Handoff(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    id = PrefixedIdField(prefix="hof")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="handoffs")
    session = models.ForeignKey(Session, on_delete=models.SET_NULL, null=True, blank=True)
    run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True)
    end_user = models.ForeignKey(EndUser, on_delete=models.SET_NULL, null=True, blank=True)
    reason_type = models.CharField(max_length=30)
    summary = models.TextField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    assignee = models.CharField(max_length=200, blank=True)  # who on the team has it: a name or an email, free text
    closed_at = models.DateTimeField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=40, unique=True, null=True, blank=True)
    is_test = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "runs_handoff"


class TicketCounter(models.Model):
    """Per-project ticket numbering (TKT-1, TKT-2, …), taken under a row lock."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, primary_key=True)
    last_number = models.IntegerField(default=0)

    class Meta:
        db_table = "runs_ticketcounter"
