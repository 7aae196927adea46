"""Writes for agents: create, update the draft, delete, publish an immutable version."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.config import validate_config
from agents.models import Agent, AgentVersion, KnowledgeSource
from kagent.errors import Unprocessable
from kagent.inputs import UNSET, is_set
from kagent.merge_patch import merge_patch
from kagent.models import Project
from tools import builtins
from tools.models import HttpTool


def agent_create(
    *,
    project: Project,
    name: str,
    description: str | None = "",
    config: dict[str, Any] | None = None,
    actions_paused: bool = False,
) -> Agent:
    return Agent.objects.create(
        project=project,
        name=name.strip(),
        description=(description or "").strip(),
        config=validate_config(config or {}),
        actions_paused=actions_paused,
    )


def agent_update(
    *,
    agent: Agent,
    name: str = UNSET,
    description: str | None = UNSET,
    config_patch: dict[str, Any] = UNSET,
    actions_paused: bool = UNSET,
) -> Agent:
    """Top-level fields replace; `config_patch` is a JSON merge patch (RFC 7396) on the draft, checked whole.
    `actions_paused` applies at once, to every version, without publishing."""
    changes: dict[str, Any] = {}
    if is_set(name):
        changes["name"] = name.strip()
    if is_set(description):
        changes["description"] = (description or "").strip()
    if is_set(config_patch):
        changes["config"] = validate_config(merge_patch(agent.config, config_patch))
    if is_set(actions_paused):
        changes["actions_paused"] = actions_paused
    if changes:
        changes["updated_at"] = timezone.now()
        Agent.objects.filter(pk=agent.pk).update(**changes)
        for key, value in changes.items():
            setattr(agent, key, value)
    return agent


def agent_delete(*, agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(deleted_at=timezone.now())


@transaction.atomic
def agent_publish(*, agent: Agent, note: str | None = "") -> AgentVersion:
    """Version n+1: the draft config and copies of every granted HTTP tool as they are now."""
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
        note=(note or "").strip(),
        config=config,
        http_tools={name: tools[name].definition() for name in granted},
        builtin_versions=builtins.versions(),
    )
    Agent.objects.filter(pk=locked.pk).update(latest_version_number=number)
    agent.latest_version_number = number
    return version


# --- knowledge ----------------------------------------------------------------------------------------------------


def knowledge_source_create(
    *,
    project: Project,
    title: str,
    content: str,
    agent: Agent | None = None,
    kind: str = KnowledgeSource.Kind.TEXT,
    searchable: bool = True,
) -> KnowledgeSource:
    if kind == KnowledgeSource.Kind.API:
        raise Unprocessable(
            "not_supported", "API knowledge sources are not available yet; add the content as a text source."
        )
    return KnowledgeSource.objects.create(
        project=project, agent=agent, title=title.strip(), kind=kind, content=content, searchable=searchable
    )


def knowledge_source_delete(*, source: KnowledgeSource) -> None:
    source.delete()


def agent_restore_version(*, agent: Agent, version: AgentVersion) -> Agent:
    """The draft becomes version `version`'s config again (publish to make it live). HTTP tools belong to the
    project, not to a version: their definitions are not restored, and the draft grants them as they are now."""
    if version.agent_id != agent.pk:
        raise Unprocessable("invalid_request", "That version belongs to another agent.")
    config = validate_config(version.config)
    now = timezone.now()
    Agent.objects.filter(pk=agent.pk).update(config=config, updated_at=now)
    agent.config, agent.updated_at = config, now
    return agent
