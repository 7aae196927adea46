from __future__ import annotations

from django.db import connection
from django.db.models import Q, QuerySet

from agents.knowledge import index
from agents.knowledge.terms import query_terms
from agents.models import Agent, AgentVersion, KnowledgeSource
from kagent.errors import NotFound
from kagent.models import Project


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
