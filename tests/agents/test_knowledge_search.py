"""The search index (a tsvector column with a GIN index): passages written and searched, the agent's scope, the
index kept in step with every write, one query answered by the GIN index."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import connection

from agents import selectors, services
from agents.knowledge import index
from agents.models import Agent, KnowledgePassage, KnowledgeSource
from tests.conftest import make_tenant

pytestmark = pytest.mark.django_db

SECTIONS = [
    ("Delivery fees", "Standard delivery costs 25 SAR and express delivery costs 45 SAR."),
    ("Cash on delivery", "Paying cash to the courier is possible for orders up to 2,000 SAR."),
    ("Warranty claims", "Bring the faulty product with its invoice to any store."),
]


def long_document(words: int = 16_000) -> str:
    """About `words` words of sections on other things, with SECTIONS somewhere in the middle."""
    filler = [f"## Topic {n}\n\n" + f"Paragraph on subject number {n} with ordinary words. " * 25 for n in range(120)]
    body = filler[:60] + [f"## {title}\n\n{text}" for title, text in SECTIONS] + filler[60:]
    return "# Help centre\n\n" + "\n\n".join(body)


def search(project: Any, agent: Agent, query: str, limit: int = 3) -> list[Any]:
    return selectors.knowledge_search(project_id=project.pk, agent_id=agent.pk, query=query, limit=limit)


def index_rows() -> int:
    """Passages in the search index: those with a non-empty vector."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM agents_knowledgepassage WHERE search_vector <> ''::tsvector")
        return int(cursor.fetchone()[0])


@pytest.fixture
def agent(alice: Any) -> Agent:
    return Agent.objects.create(project=alice.project, name="helpdesk")


def test_a_long_document_returns_the_passage_that_answers(alice: Any, agent: Agent) -> None:
    content = long_document()[:100_000]
    started = time.perf_counter()
    source = services.knowledge_source_create(project=alice.project, title="Help", content=content)
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0, f"indexing 100,000 characters took {elapsed:.2f}s"
    assert source.passage_count > 50
    assert index_rows() == source.passage_count == KnowledgePassage.objects.filter(source=source).count()

    hits = search(alice.project, agent, "how much is express shipping?")
    assert hits[0].title == "Help › Help centre › Delivery fees" and "45 SAR" in hits[0].text
    assert hits[0].source_id == source.pk
    assert "2,000 SAR" in search(alice.project, agent, "can I pay the driver in cash")[0].text
    assert search(alice.project, agent, "nothing like this anywhere zzz") == []


def test_search_is_one_query(alice: Any, agent: Agent, django_assert_num_queries: Any) -> None:
    services.knowledge_source_create(project=alice.project, title="Help", content=long_document(3000))
    with django_assert_num_queries(1):
        assert search(alice.project, agent, "warranty claim invoice")


def test_no_whole_table_scan_and_the_gin_index_answers_the_match(alice: Any, agent: Agent) -> None:
    services.knowledge_source_create(project=alice.project, title="Help", content=long_document(3000))
    params = {"project": alice.project.pk, "agent": agent.pk, "limit": 3, "query": "'warranti'", "terms": ["warranti"]}
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # tiny test tables would be scanned whatever the indexes
        cursor.execute("EXPLAIN " + index._SEARCH, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "Seq Scan on agents_knowledgepassage" not in plan, plan
        cursor.execute("EXPLAIN SELECT id FROM agents_knowledgepassage WHERE search_vector @@ %s::tsquery", ["'x'"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "agents_knowledgepassage_search" in plan, plan


def test_arabic_questions_find_passages_written_another_way(alice: Any, agent: Agent) -> None:
    services.knowledge_source_create(
        project=alice.project,
        title="سياسة الإرجاع",
        content="## مدة الإرجاع\nيمكنكم إرجاع المنتجات خلال ٣٠ يوماً.\n\n## الشحن\nالتوصيل مجاني فوق ٣٠٠ ريال.",
    )
    for question in ("كم مدة الارجاع", "إِرْجَاع منتج", "ارجـــاع المنتجات", "30 يوم"):
        hits = search(alice.project, agent, question, limit=1)
        assert hits and hits[0].title == "سياسة الإرجاع › مدة الإرجاع", question


def test_only_the_agents_searchable_sources_of_its_project(alice: Any, agent: Agent) -> None:
    other_agent = Agent.objects.create(project=alice.project, name="sales")
    bob = make_tenant("bob")
    bob_agent = Agent.objects.create(project=bob.project, name="bob's")
    create = services.knowledge_source_create
    shared = create(project=alice.project, title="Shared", content="Our warranty lasts two years.")
    own = create(project=alice.project, agent=agent, title="Own", content="Warranty claims need the invoice.")
    create(project=alice.project, agent=other_agent, title="Other agent", content="Warranty for sales staff.")
    create(project=alice.project, title="Hidden", content="Warranty secrets.", searchable=False)
    create(project=bob.project, agent=bob_agent, title="Bob's", content="Bob's warranty.")

    assert {hit.source_id for hit in search(alice.project, agent, "warranty", limit=10)} == {shared.pk, own.pk}
    assert [hit.title for hit in search(bob.project, bob_agent, "warranty", limit=10)] == ["Bob's"]


def test_updates_and_deletes_keep_the_index_in_step(alice: Any, agent: Agent) -> None:
    source = services.knowledge_source_create(project=alice.project, title="Hours", content="Open from 9 to 5.")
    assert search(alice.project, agent, "open")

    source = services.knowledge_source_update(source=source, content="## Ramadan\nWe close at sunset.")
    assert not search(alice.project, agent, "open")
    assert [hit.title for hit in search(alice.project, agent, "sunset")] == ["Hours › Ramadan"]

    source = services.knowledge_source_update(source=source, title="Opening times")
    assert [hit.title for hit in search(alice.project, agent, "sunset")] == ["Opening times › Ramadan"]
    assert search(alice.project, agent, "opening times")  # the title is searched too

    services.knowledge_source_update(source=source, searchable=False)
    assert not search(alice.project, agent, "sunset")
    assert index_rows() == 1

    services.knowledge_source_delete(source=KnowledgeSource.objects.get(pk=source.pk))
    assert index_rows() == 0 and not KnowledgePassage.objects.exists()


def test_deleting_the_agent_or_the_project_takes_the_index_along(alice: Any, agent: Agent) -> None:
    services.knowledge_source_create(project=alice.project, agent=agent, title="A", content="Alpha words.")
    services.knowledge_source_create(project=alice.project, title="B", content="Beta words.")
    agent.delete()
    assert index_rows() == 1
    alice.project.delete()
    assert index_rows() == 0


def test_sources_indexed_with_older_terms_are_indexed_again(alice: Any, agent: Agent) -> None:
    source = services.knowledge_source_create(project=alice.project, title="Care", content="Oil the cast iron pan.")
    KnowledgePassage.objects.all().delete()
    KnowledgeSource.objects.filter(pk=source.pk).update(index_version=0, passage_count=0)
    assert not search(alice.project, agent, "pan")
    assert services.knowledge_refresh_due() == {"queued": 0, "reindexed": 1}
    assert search(alice.project, agent, "pan")
