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
    # How runs that pin no version split over published versions: [{"version", "weight"}] (weights sum to 100),
    # sticky per session and per end user; null: every such run runs the latest version (SPEC §4 "traffic").
    traffic = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # Deleted agents keep their versions for the history of runs made with them.
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["project", "deleted_at"])]


class AgentVersion(models.Model):
    """Version `number` of an agent: the draft config and copies of its HTTP and MCP tools when published. Never
    changes."""

    id = PrefixedIdField(prefix="ver")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agent_versions")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    number = models.IntegerField()
    note = models.CharField(max_length=1000, blank=True)
    config = models.JSONField()
    # name -> the HTTP tool definition as it was when published.
    http_tools = models.JSONField(default=dict)
    # `<server>__<tool>` -> the granted MCP tool as listed when published, with its server's URL and headers
    # (secrets by name): `{name, server, tool, description, input_schema, url, headers}`.
    mcp_tools = models.JSONField(default=dict)
    # name -> version of each built-in's model-facing text.
    builtin_versions = models.JSONField(default=dict)
    # Published with `force` although checks failed: the failures as they were ([{check, name, problems, run}]).
    forced = models.BooleanField(default=False)
    check_failures = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "number"], name="agent_version_number_unique")]


class KnowledgeSource(models.Model):
    """What the agent can search with `search_knowledge` (for an agent, or for the whole project when agent is null):
    a `text` (Markdown) source written here, or an `api` source fetched from the business's URL on a schedule.
    Either way it is searched through its passages (KnowledgePassage)."""

    class Kind(models.TextChoices):
        TEXT = "text"
        API = "api"

    class FetchStatus(models.TextChoices):
        NONE = "", "not fetched yet"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    id = PrefixedIdField(prefix="ks")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="knowledge_sources")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, null=True, blank=True, related_name="knowledge")
    title = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TEXT)
    # text: as written; api: the text made from the last good fetch (what the passages were split from).
    content = models.TextField(blank=True)
    url = models.CharField(max_length=2048, blank=True)
    response = models.JSONField(default=dict)
    searchable = models.BooleanField(default=True)
    # api sources: the schedule, and the last fetch (a failed one keeps the passages of the last good one).
    refresh_minutes = models.IntegerField(null=True, blank=True)
    next_fetch_at = models.DateTimeField(null=True, blank=True)
    fetch_queued_at = models.DateTimeField(null=True, blank=True)
    last_fetch_status = models.CharField(max_length=10, choices=FetchStatus.choices, blank=True, default="")
    last_fetch_at = models.DateTimeField(null=True, blank=True)
    last_fetch_error = models.CharField(max_length=40, blank=True)
    last_fetch_http_status = models.IntegerField(null=True, blank=True)
    # The index: how many passages, and the version of agents.knowledge.terms they were indexed with.
    passage_count = models.IntegerField(default=0)
    index_version = models.IntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["project", "agent"]),
            models.Index(fields=["next_fetch_at"], name="knowledge_next_fetch", condition=models.Q(kind="api")),
        ]


class KnowledgePassage(models.Model):
    """A part of a knowledge source, the unit `search_knowledge` finds and returns.

    The search index is not a Django field: the column `search_vector` (tsvector, GIN index) of this table, added
    by migration 0003 and written in the same transaction as the passage rows (agents.knowledge.index).
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    source = models.ForeignKey(KnowledgeSource, on_delete=models.CASCADE, related_name="passages")
    position = models.IntegerField()
    title = models.CharField(max_length=300)
    text = models.TextField()
    # Terms in the title and text (the document length of BM25).
    term_count = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["source", "position"])]
