"""Writes for agents: create, update the draft, delete, publish an immutable version."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.config import validate_config
from agents.models import Agent, AgentVersion
from kagent.errors import Unprocessable
from kagent.merge_patch import merge_patch
from kagent.models import Project
from tools import builtins
from tools.models import HttpTool


def _check_text(value: Any, field: str, max_length: int, required: bool) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise Unprocessable(
            "invalid_request",
            f"{field} is a {'non-empty ' if required else ''}string.",
            details=[{"path": f"$.{field}", "message": "must be a string"}],
        )
    if len(value) > max_length:
        raise Unprocessable(
            "invalid_request",
            f"{field} is at most {max_length} characters.",
            details=[{"path": f"$.{field}", "message": f"length must be at most {max_length}"}],
        )
    return value.strip()


def _check_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise Unprocessable(
            "invalid_request",
            f"{field} is true or false.",
            details=[{"path": f"$.{field}", "message": "must be of type boolean"}],
        )
    return value


AGENT_FIELDS = {"name", "description", "config", "actions_paused"}


def _check_fields(data: dict[str, Any]) -> None:
    unknown = sorted(set(data) - AGENT_FIELDS)
    if unknown:
        raise Unprocessable(
            "invalid_request",
            f"Unknown field(s): {', '.join(unknown)[:200]}.",
            details=[{"path": f"$.{name}", "message": "unknown field"} for name in unknown[:20]],
        )


def agent_create(*, project: Project, data: dict[str, Any]) -> Agent:
    _check_fields(data)
    name = _check_text(data.get("name"), "name", 200, required=True)
    description = _check_text(data.get("description"), "description", 1000, required=False)
    config = validate_config(data.get("config", {}))
    actions_paused = _check_bool(data.get("actions_paused", False), "actions_paused")
    return Agent.objects.create(
        project=project, name=name, description=description, config=config, actions_paused=actions_paused
    )


def agent_update(*, agent: Agent, data: dict[str, Any]) -> Agent:
    """PATCH: top-level fields replace; `config` is a JSON merge patch (RFC 7396) on the draft, checked whole."""
    _check_fields(data)
    changes: dict[str, Any] = {}
    if "name" in data:
        changes["name"] = _check_text(data["name"], "name", 200, required=True)
    if "description" in data:
        changes["description"] = _check_text(data["description"], "description", 1000, required=False)
    if "config" in data:
        if not isinstance(data["config"], dict):
            raise Unprocessable(
                "invalid_config",
                "$: config must be a JSON object",
                details=[{"path": "$", "message": "config must be a JSON object"}],
            )
        changes["config"] = validate_config(merge_patch(agent.config, data["config"]))
    if "actions_paused" in data:
        changes["actions_paused"] = _check_bool(data["actions_paused"], "actions_paused")
    if changes:
        changes["updated_at"] = timezone.now()
        Agent.objects.filter(pk=agent.pk).update(**changes)
        for key, value in changes.items():
            setattr(agent, key, value)
    return agent


def agent_delete(*, agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(deleted_at=timezone.now())


@transaction.atomic
def agent_publish(*, agent: Agent, note: Any = "") -> AgentVersion:
    """Version n+1: the draft config and copies of every granted HTTP tool as they are now."""
    note = _check_text(note, "note", 1000, required=False)
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    config = validate_config(locked.config)
    granted = [grant["tool"] for grant in config["tools"]["http"]]
    tools = {tool.name: tool for tool in HttpTool.objects.filter(project_id=locked.project_id, name__in=granted)}
    missing = [name for name in granted if name not in tools]
    if missing:
        raise Unprocessable(
            "unknown_tool",
            f"The draft grants HTTP tool(s) that don't exist: {', '.join(missing)}. Create them or remove the grant.",
            details=[{"path": "$.config.tools.http", "message": f"no such tool: {name}"} for name in missing],
        )
    number = (locked.latest_version_number or 0) + 1
    version = AgentVersion.objects.create(
        project_id=locked.project_id,
        agent=locked,
        number=number,
        note=note,
        config=config,
        http_tools={name: tools[name].definition() for name in granted},
        builtin_versions=builtins.versions(),
    )
    Agent.objects.filter(pk=locked.pk).update(latest_version_number=number)
    agent.latest_version_number = number
    return version
