"""Writes for HTTP tools. Every write validates the whole definition; a refused write changes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from kagent.errors import Conflict, Unprocessable
from kagent.inputs import UNSET, is_set
from kagent.merge_patch import merge_patch
from kagent.models import Project
from kagent.secrets import secret_allowed_hosts
from tools.models import HttpTool
from tools.validation import validate_http_tool


def _validate(project: Project, definition: dict[str, Any]) -> dict[str, Any]:
    return validate_http_tool(definition, secret_hosts=lambda name: secret_allowed_hosts(project=project, name=name))


def http_tool_create(
    *,
    project: Project,
    name: str,
    description: str,
    effect: str,
    config: dict[str, Any],
    requires_verified_user: bool = False,
) -> HttpTool:
    clean = _validate(
        project,
        {
            "name": name,
            "description": description,
            "effect": effect,
            "requires_verified_user": requires_verified_user,
            "config": config,
        },
    )
    try:
        with transaction.atomic():
            return HttpTool.objects.create(project=project, **clean)
    except IntegrityError:
        raise Conflict("tool_already_exists", f"This project already has an HTTP tool named {clean['name']}.") from None


def http_tool_update(
    *,
    tool: HttpTool,
    name: str = UNSET,
    description: str = UNSET,
    effect: str = UNSET,
    requires_verified_user: bool = UNSET,
    config_patch: dict[str, Any] = UNSET,
) -> HttpTool:
    """Top-level fields replace, `config_patch` is a JSON merge patch; the result is validated whole.

    Published versions keep their own copies: an edit reaches production only when the agent is published again.
    """
    if is_set(name) and name != tool.name:
        raise Unprocessable(
            "invalid_tool",
            "A tool's name can't change: agents grant it by name. Create a new tool instead.",
            details=[{"path": "$.name", "message": "can't change"}],
        )
    definition: dict[str, Any] = {
        "name": tool.name,
        "description": description if is_set(description) else tool.description,
        "effect": effect if is_set(effect) else tool.effect,
        "requires_verified_user": (
            requires_verified_user if is_set(requires_verified_user) else tool.requires_verified_user
        ),
        "config": merge_patch(tool.config, config_patch) if is_set(config_patch) else tool.config,
    }
    clean = _validate(tool.project, definition)
    clean["updated_at"] = timezone.now()
    HttpTool.objects.filter(pk=tool.pk).update(**clean)
    tool.refresh_from_db()
    return tool


def http_tool_delete(*, tool: HttpTool, granted_by: Sequence[str]) -> None:
    """Refused while an agent's draft grants the tool (`granted_by`: those agents' ids, from
    `agents.selectors.agents_granting_tool`); published versions hold copies and keep working."""
    users = list(granted_by)
    if users:
        raise Conflict(
            "tool_in_use",
            f"The draft of agent(s) {', '.join(users)} grants this tool; remove the grant first.",
            details={"agents": users},
        )
    tool.delete()
