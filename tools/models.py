"""HTTP tool definitions (`tool_…`): validated on write, copied into each published agent version."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone

from kagent.ids import PrefixedIdField
from kagent.models import Project
from tools.mcp_validation import mcp_tool_name


class HttpTool(models.Model):
    class Effect(models.TextChoices):
        READ = "read"
        ACTION = "action"

    id = PrefixedIdField(prefix="tool")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="http_tools")
    name = models.CharField(max_length=30)
    description = models.CharField(max_length=1000)
    effect = models.CharField(max_length=10, choices=Effect.choices)
    requires_verified_user = models.BooleanField(default=False)
    config = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="http_tool_name_unique_in_project")]

    def definition(self) -> dict[str, Any]:
        """The tool as the run engine uses it, and as it is copied into a published version."""
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "effect": self.effect,
            "requires_verified_user": self.requires_verified_user,
            "config": self.config,
        }


class McpServer(models.Model):
    """A business's MCP server (`mcp_…`, SPEC §6 "MCP servers") and the tools it listed when last asked.

    `tools`: each `{name, description, input_schema, grantable, reason}`; `reason` says why a tool can't be granted
    (None when it can). A failed re-listing keeps the previous listing and records `last_error` (`{code, message}`).
    """

    id = PrefixedIdField(prefix="mcp")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="mcp_servers")
    name = models.CharField(max_length=20)
    url = models.CharField(max_length=2048)
    headers = models.JSONField(default=dict)
    tools = models.JSONField(default=list)
    truncated = models.BooleanField(default=False)
    protocol_version = models.CharField(max_length=20, default="")
    listed_at = models.DateTimeField(null=True)
    last_error = models.JSONField(null=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="mcp_server_name_unique_in_project")]

    def listed(self, tool: str) -> dict[str, Any] | None:
        """The listing's entry for the tool named `tool`, or None when the last listing didn't have it."""
        return next((item for item in self.tools if item.get("name") == tool), None)

    def definition(self, listed: dict[str, Any]) -> dict[str, Any]:
        """A listed tool as the run engine calls it, and as a published version copies it: the tool as listed and
        the server's URL and headers (secrets by name, never their values)."""
        return {
            "name": mcp_tool_name(self.name, listed["name"]),
            "server": self.name,
            "tool": listed["name"],
            "description": listed["description"],
            "input_schema": listed["input_schema"],
            "url": self.url,
            "headers": dict(self.headers),
        }
