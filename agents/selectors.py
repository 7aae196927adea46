from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import F, Q, QuerySet

from agents.diff import Change, Snapshot, snapshot_diff
from agents.knowledge import index
from agents.knowledge.terms import query_terms
from agents.models import Agent, AgentVersion, KnowledgeSource
from kagent.errors import Conflict, NotFound
from kagent.models import Project
from tools.models import HttpTool
from tools.selectors import mcp_granted, mcp_servers_named


def agent_list(*, project: Project) -> QuerySet[Agent]:
    return Agent.objects.filter(project=project, deleted_at__isnull=True)


def agent_get(*, project: Project, agent_id: str) -> Agent:
    agent = agent_list(project=project).filter(pk=agent_id).first()
    if agent is None:
        raise NotFound("No agent with that id in this project.")
    return agent


def version_list(*, agent: Agent) -> QuerySet[AgentVersion]:
    return AgentVersion.objects.filter(agent=agent, project=agent.project)


def version_get(*, agent: Agent, number: int) -> AgentVersion:
    version = version_list(agent=agent).filter(number=number).first()
    if version is None:
        raise NotFound("This agent has no version with that number.")
    return version


def greeting_version(*, agent: Agent) -> AgentVersion:
    """The version whose greeting a customer opening the widget sees: the one most of the traffic goes to (after a
    rollback, the version rolled back to), else the latest. Conflict `not_published` before the first publish, as a
    run answers."""
    weights = {int(e["version"]): int(e.get("weight", 0)) for e in agent.traffic or [] if e.get("weight", 0) > 0}
    versions = version_list(agent=agent)
    version = None
    if weights:
        most = max(weights.items(), key=lambda item: (item[1], item[0]))[0]
        version = versions.filter(number=most).first()
    version = version or versions.order_by("-number").first()
    if version is None:
        raise Conflict("not_published", "This agent has no published version yet. Publish it first.")
    return version


def knowledge_source_list(*, project: Project) -> QuerySet[KnowledgeSource]:
    return KnowledgeSource.objects.filter(project=project)


def knowledge_source_get(*, project: Project, source_id: str) -> KnowledgeSource:
    source = knowledge_source_list(project=project).filter(pk=source_id).first()
    if source is None:
        raise NotFound("No knowledge source with that id in this project.")
    return source


def searchable_sources(*, project_id: str, agent_id: str) -> QuerySet[KnowledgeSource]:
    """What `search_knowledge` searches for an agent: its own searchable sources and the project's shared ones."""
    return KnowledgeSource.objects.filter(project_id=project_id, searchable=True).filter(
        Q(agent_id=agent_id) | Q(agent__isnull=True)
    )


def knowledge_search(*, project_id: str, agent_id: str, query: str, limit: int = 3) -> list[index.Hit]:
    """The agent's best passages for `query`, best first: one ranked query on the search index, over its own
    searchable sources and the project's shared ones."""
    return index.search(
        connection, project_id=project_id, agent_id=agent_id, terms=query_terms(query), limit=max(1, min(limit, 20))
    )


def agents_granting_tool(*, project: Project, name: str) -> list[str]:
    """The ids of the agents whose draft grants the HTTP tool `name`."""
    return [
        agent.id
        for agent in agent_list(project=project).only("id", "config")
        if any(grant.get("tool") == name for grant in agent.config.get("tools", {}).get("http", []))
    ]


def agents_granting_mcp_server(*, project: Project, name: str) -> list[str]:
    """The ids of the agents whose draft grants a tool of the MCP server named `name`."""
    return [
        agent.id
        for agent in agent_list(project=project).only("id", "config")
        if any(grant.get("server") == name for grant in agent.config.get("tools", {}).get("mcp", []))
    ]


# --- versions side by side --------------------------------------------------------------------------------------


def _granted(config: dict[str, Any]) -> list[str]:
    return [grant["tool"] for grant in config.get("tools", {}).get("http", [])]


def _mcp_grants(config: dict[str, Any]) -> list[dict[str, Any]]:
    return list(config.get("tools", {}).get("mcp", []))


def draft_snapshot(*, agent: Agent) -> Snapshot:
    """What publishing now would copy: the draft config and the granted HTTP and MCP tools as they are now."""
    granted = _granted(agent.config)
    tools = HttpTool.objects.filter(project_id=agent.project_id, name__in=granted)
    mcp = mcp_granted(project_id=agent.project_id, grants=_mcp_grants(agent.config))
    return Snapshot(
        config=agent.config,
        http_tools={tool.name: tool.definition() for tool in tools},
        mcp_tools=mcp.definitions,
    )


def version_snapshot(*, version: AgentVersion) -> Snapshot:
    return Snapshot(config=version.config, http_tools=version.http_tools, mcp_tools=version.mcp_tools)


@dataclass(frozen=True)
class VersionDiff:
    agent: Agent
    before: int | None  # None: the draft
    after: int | None
    changes: list[Change]


def version_diff(*, agent: Agent, before: int | None, after: int | None) -> VersionDiff:
    """What changed from version `before` to version `after` (None: the draft as it stands)."""

    def snapshot(number: int | None) -> Snapshot:
        if number is None:
            return draft_snapshot(agent=agent)
        return version_snapshot(version=version_get(agent=agent, number=number))

    return VersionDiff(agent, before, after, snapshot_diff(snapshot(before), snapshot(after)))


def agents_with_unpublished_changes(*, project: Project, agents: Iterable[Agent]) -> set[str]:
    """The ids of the agents whose draft would publish something other than their latest version (the config, or
    an edit of a granted HTTP tool or a new listing of a granted MCP tool since): four queries at most for the
    whole list."""
    agents = list(agents)
    latest = {
        version.agent_id: version
        for version in AgentVersion.objects.filter(
            project=project, agent__in=agents, number=F("agent__latest_version_number")
        )
    }
    granted = {name for agent in agents for name in _granted(agent.config)}
    tools = {tool.name: tool.definition() for tool in HttpTool.objects.filter(project=project, name__in=granted)}
    servers = mcp_servers_named(
        project_id=project.pk, names=(grant["server"] for agent in agents for grant in _mcp_grants(agent.config))
    )
    changed = set()
    for agent in agents:
        version = latest.get(agent.pk)
        if version is None:
            continue  # never published: the list says so instead
        draft = Snapshot(
            agent.config,
            {name: tools[name] for name in _granted(agent.config) if name in tools},
            mcp_granted(project_id=project.pk, grants=_mcp_grants(agent.config), servers=servers).definitions,
        )
        if draft != version_snapshot(version=version):
            changed.add(agent.pk)
    return changed


# --- the traffic split (its entries are checked when set: agents/services.py traffic_checked) ---------------------


def traffic_version(traffic: list[dict[str, Any]], agent_id: str, sticky: str | None) -> int | None:
    """The version the split gives `sticky` (a session's id or an end user's external id: the same one always
    gets the same version while the split stands), or a draw by weight for a run that is neither."""
    entries = [entry for entry in traffic if int(entry.get("weight", 0)) > 0]
    if not entries:
        return None
    if sticky:
        digest = hashlib.sha256(f"{agent_id}:{sticky}".encode()).digest()
        point = int.from_bytes(digest[:8], "big") % 100
    else:
        point = secrets.randbelow(100)
    for entry in entries:
        point -= int(entry["weight"])
        if point < 0:
            return int(entry["version"])
    return int(entries[-1]["version"])


def split_version(agent: Agent, sticky: str | None, *, pinned: AgentVersion | None) -> AgentVersion | None:
    """The version the agent's split gives a new run when it differs from `pinned` (the published one), else None."""
    number = traffic_version(agent.traffic or [], agent.pk, sticky)
    if number is None or (pinned is not None and number == pinned.number):
        return None
    # Versions are never deleted; a split names published ones (agents.services).
    return AgentVersion.objects.filter(agent_id=agent.pk, number=number).first()
