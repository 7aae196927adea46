"""An agent's checks (saved test conversations) and check runs. Their tables keep the names they had in `agents`
(moved by state only: migrations/0001)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from agents.models import Agent
from kagent.ids import PrefixedIdField
from kagent.models import Project


class Check(models.Model):
    """A saved test conversation for an agent (`chk_…`, SPEC §4 "Checks and traffic"): the customer's `input` (one
    message, or a list of them: one run each, in one conversation), an optional `end_user` ({external_id, traits}),
    `client_outputs` ({tool name: output}) answering client tools, and what must hold: `expect` {tools_called,
    tools_not_called, output_contains, output_not_contains, status}."""

    id = PrefixedIdField(prefix="chk")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="checks")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="checks")
    name = models.CharField(max_length=200)
    input = models.JSONField()
    end_user = models.JSONField(null=True, blank=True)
    client_outputs = models.JSONField(default=dict)
    expect = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "agents_check"


class CheckRun(models.Model):
    """One run of an agent's checks (`chkr_…`) against its draft (`version` null) or a published version: `running`,
    then `passed` or `failed`; `results` one per check: {check, name, passed, problems, run}."""

    class Status(models.TextChoices):
        RUNNING = "running"
        PASSED = "passed"
        FAILED = "failed"

    id = PrefixedIdField(prefix="chkr")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="check_runs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="check_runs")
    version = models.IntegerField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    results = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "agents_checkrun"

    @property
    def running(self) -> bool:
        return self.status == self.Status.RUNNING

    @property
    def failed_count(self) -> int:
        return sum(1 for result in self.results if isinstance(result, dict) and not result.get("passed"))
