"""Agents (a draft configuration) and their immutable published versions."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from kagent.ids import PrefixedIdField
from kagent.models import Project


class Agent(models.Model):
    id = PrefixedIdField(prefix="agt")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=200)
    description = models.CharField(max_length=1000, blank=True)
    # The draft: what the test panel runs and what the next publish copies.
    config = models.JSONField(default=dict)
    # Live switch: applies to every version at once, without publishing.
    actions_paused = models.BooleanField(default=False)
    latest_version_number = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # Deleted agents keep their versions for the history of runs made with them.
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["project", "deleted_at"])]


class AgentVersion(models.Model):
    """Version `number` of an agent: the draft config and copies of its HTTP tools when published. Never changes."""

    id = PrefixedIdField(prefix="ver")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agent_versions")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    number = models.IntegerField()
    note = models.CharField(max_length=1000, blank=True)
    config = models.JSONField()
    # name -> the HTTP tool definition as it was when published.
    http_tools = models.JSONField(default=dict)
    # name -> version of each built-in's model-facing text.
    builtin_versions = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "number"], name="agent_version_number_unique")]


class KnowledgeSource(models.Model):
    """Text the agent can search with `search_knowledge` (for an agent, or for the whole project when agent is null)."""

    class Kind(models.TextChoices):
        TEXT = "text"
        API = "api"

    id = PrefixedIdField(prefix="ks")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="knowledge_sources")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, null=True, blank=True, related_name="knowledge")
    title = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TEXT)
    content = models.TextField(blank=True)
    url = models.CharField(max_length=2048, blank=True)
    response = models.JSONField(default=dict)
    searchable = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
