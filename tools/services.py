"""Writes for HTTP tools. Every write validates the whole definition; a refused write changes nothing."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import Agent
from kagent.errors import Conflict, Unprocessable
from kagent.merge_patch import merge_patch
from kagent.models import Project
from kagent.secrets import secret_allowed_hosts
from tools.models import HttpTool
from tools.validation import validate_http_tool


def _validate(project: Project, data: dict[str, Any]) -> dict[str, Any]:
    return validate_http_tool(data, secret_hosts=lambda name: secret_allowed_hosts(project=project, name=name))


def http_tool_create(*, project: Project, data: dict[str, Any]) -> HttpTool:
    clean = _validate(project, data)
    try:
        with transaction.atomic():
            return HttpTool.objects.create(project=project, **clean)
    except IntegrityError:
        raise Conflict("tool_already_exists", f"This project already has an HTTP tool named {clean['name']}.") from None


def http_tool_update(*, tool: HttpTool, data: dict[str, Any]) -> HttpTool:
    """PATCH: top-level fields replace, `config` is a JSON merge patch; the result is validated whole.

    Published versions keep their own copies: an edit reaches production only when the agent is published again.
    """
    if "name" in data and data["name"] != tool.name:
        raise Unprocessable(
            "invalid_tool",
            "A tool's name can't change: agents grant it by name. Create a new tool instead.",
            details=[{"path": "$.name", "message": "can't change"}],
        )
    current = {
        "name": tool.name,
        "description": tool.description,
        "effect": tool.effect,
        "requires_verified_user": tool.requires_verified_user,
        "config": tool.config,
    }
    merged = dict(current)
    for key, value in data.items():
        merged[key] = merge_patch(current.get(key), value) if key == "config" else value
    clean = _validate(tool.project, merged)
    clean["updated_at"] = timezone.now()
    HttpTool.objects.filter(pk=tool.pk).update(**clean)
    tool.refresh_from_db()
    return tool


def http_tool_delete(*, tool: HttpTool) -> None:
    """Refused while an agent's draft grants the tool; published versions hold copies and keep working."""
    users = [
        agent.id
        for agent in Agent.objects.filter(project_id=tool.project_id, deleted_at__isnull=True).only("id", "config")
        if any(grant.get("tool") == tool.name for grant in agent.config.get("tools", {}).get("http", []))
    ]
    if users:
        raise Conflict(
            "tool_in_use",
            f"The draft of agent(s) {', '.join(users)} grants this tool; remove the grant first.",
            details={"agents": users},
        )
    tool.delete()
