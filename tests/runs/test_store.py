"""The hot path's hand-written SQL says what the ORM would: run creation's one-query lookup agrees with the
selectors it stands in for."""

from __future__ import annotations

import pytest

from agents.models import KnowledgeSource
from agents.selectors import searchable_sources
from runs import store

pytestmark = pytest.mark.django_db


def publish(api, name="a"):
    agent = api.post("/v1/agents", {"name": name}, format="json").json()["id"]
    assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
    return agent


def source(api, **body):
    response = api.post(
        "/v1/knowledge_sources", {"title": "t", "content": "Returns within 30 days.", **body}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def agrees(project_id, agent_id):
    found = store.latest_version(project_id=project_id, agent_id=agent_id)
    assert found is not None
    expected = searchable_sources(project_id=project_id, agent_id=agent_id).exists()
    assert found[2] is expected
    return expected


def test_latest_version_and_searchable_knowledge_agree_with_the_selectors(alice, bob):
    api = alice.client()
    agent, other = publish(api, "a"), publish(api, "b")
    project = alice.project.pk
    assert agrees(project, agent) is False
    mine = source(api, agent=other)  # another agent's source
    assert agrees(project, agent) is False and agrees(project, other) is True
    KnowledgeSource.objects.filter(pk=mine).update(searchable=False)
    assert agrees(project, other) is False
    source(bob.client(), title="bob's")  # another project's shared source
    assert agrees(project, agent) is False
    source(api)  # the project's shared source
    assert agrees(project, agent) is True and agrees(project, other) is True
    found = store.latest_version(project_id=project, agent_id=agent)
    assert found is not None and found[1].number == 1 and found[0].pk == agent


def test_latest_version_is_none_for_unpublished_deleted_or_foreign_agents(alice, bob):
    api = alice.client()
    draft = api.post("/v1/agents", {"name": "draft"}, format="json").json()["id"]
    assert store.latest_version(project_id=alice.project.pk, agent_id=draft) is None
    agent = publish(api)
    assert store.latest_version(project_id=bob.project.pk, agent_id=agent) is None
    api.delete(f"/v1/agents/{agent}")
    assert store.latest_version(project_id=alice.project.pk, agent_id=agent) is None
