"""The search index over knowledge passages on PostgreSQL, and the one ranked query over it.

The index is the column `search_vector tsvector` of agents_knowledgepassage with a GIN index (migration
agents/0003). The vector is written as a tsvector literal of the terms of `agents.knowledge.terms` (the same function
reads the query; no text search parser or dictionary in between: 'simple' matching on already normalised terms),
title terms weighted A. The query is an OR of the terms (`@@`, answered by the GIN index) restricted to the agent's
searchable sources, ranked by BM25 (k1 = 1.2, b = 0.75, title terms counted twice) computed in the same statement
from the matching vectors (`unnest` gives each term's positions: its frequency), with document frequencies and the
average length taken over the agent's searchable passages.

Writes happen in the caller's transaction, in the passage rows they index, so the index goes away with them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from agents.knowledge.passages import PassageDraft
from agents.knowledge.terms import terms

TITLE_WEIGHT: Final = 2
K1: Final = 1.2
B: Final = 0.75
MAX_POSITION: Final = 16383  # PostgreSQL keeps positions up to this


@dataclass(frozen=True)
class IndexedPassage:
    id: int
    title_terms: Sequence[str]
    body_terms: Sequence[str]


@dataclass(frozen=True)
class Hit:
    passage_id: int
    source_id: str
    title: str
    text: str
    score: float


def _quote(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_literal(title_terms: Sequence[str], body_terms: Sequence[str]) -> str:
    """`'term':1A,4 'other':2` — positions in order, title terms weighted A (counted twice by the ranking)."""
    positions: dict[str, list[str]] = defaultdict(list)
    for index, term in enumerate(title_terms, start=1):
        positions[term].append(f"{min(index, MAX_POSITION)}A")
    for index, term in enumerate(body_terms, start=len(title_terms) + 1):
        positions[term].append(str(min(index, MAX_POSITION)))
    return " ".join(f"{_quote(term)}:{','.join(found)}" for term, found in positions.items())


def write(connection: BaseDatabaseWrapper, passages: Sequence[IndexedPassage]) -> None:
    """Index passages whose rows exist (inserted in this transaction)."""
    if not passages:
        return
    with connection.cursor() as cursor:
        for start in range(0, len(passages), 500):
            batch = passages[start : start + 500]
            values = ", ".join(["(%s, %s)"] * len(batch))
            params: list[Any] = []
            for passage in batch:
                params += [passage.id, tsvector_literal(passage.title_terms, passage.body_terms)]
            cursor.execute(
                "UPDATE agents_knowledgepassage AS p SET search_vector = v.vector::tsvector "  # noqa: S608
                f"FROM (VALUES {values}) AS v(id, vector) WHERE p.id = v.id::bigint",
                params,
            )


def replace_passages(
    *,
    connection: BaseDatabaseWrapper,
    passage_model: type[models.Model],
    project_id: str,
    source_id: str,
    drafts: Sequence[PassageDraft],
) -> int:
    """A source's passages replaced by `drafts` and indexed; call inside a transaction. The number of passages.

    `passage_model` is agents.models.KnowledgePassage (or its historical version, in a migration)."""
    passage_model._default_manager.filter(source_id=source_id).delete()
    drafted = [(draft, terms(draft.title), terms(draft.text)) for draft in drafts]
    rows = passage_model._default_manager.bulk_create(
        [
            passage_model(
                project_id=project_id,
                source_id=source_id,
                position=position,
                title=draft.title,
                text=draft.text,
                term_count=len(title_terms) + len(body_terms),  # BM25's document length
            )
            for position, (draft, title_terms, body_terms) in enumerate(drafted)
        ]
    )
    write(connection, [IndexedPassage(row.pk, t, b) for row, (_, t, b) in zip(rows, drafted, strict=True)])
    return len(rows)


_SCOPE = """
    JOIN agents_knowledgesource s ON s.id = p.source_id
    WHERE s.project_id = %(project)s AND s.searchable AND (s.agent_id = %(agent)s OR s.agent_id IS NULL)
"""

_SEARCH = f"""
WITH hits AS (
    SELECT p.id, p.term_count, t.lexeme,
           cardinality(t.positions) + {TITLE_WEIGHT - 1} * cardinality(array_positions(t.weights, 'A')) AS tf
    FROM agents_knowledgepassage p
    CROSS JOIN LATERAL unnest(p.search_vector) AS t(lexeme, positions, weights)
    {_SCOPE}
      AND p.search_vector @@ %(query)s::tsquery AND t.lexeme = ANY(%(terms)s)
),
df AS (SELECT lexeme, count(*)::float AS n FROM hits GROUP BY lexeme),
stats AS (
    SELECT count(*)::float AS n, coalesce(avg(p.term_count), 1)::float AS avgdl
    FROM agents_knowledgepassage p {_SCOPE}
),
ranked AS (
    SELECT h.id, sum(
        ln(1 + (stats.n - df.n + 0.5) / (df.n + 0.5))
        * h.tf * {K1 + 1} / (h.tf + {K1} * (1 - {B} + {B} * h.term_count / greatest(stats.avgdl, 1)))
    ) AS score
    FROM hits h JOIN df ON df.lexeme = h.lexeme CROSS JOIN stats
    GROUP BY h.id
    ORDER BY score DESC, h.id
    LIMIT %(limit)s
)
SELECT p.id, p.source_id, p.title, p.text, r.score
FROM ranked r JOIN agents_knowledgepassage p ON p.id = r.id
ORDER BY r.score DESC, p.id
"""  # noqa: S608 - only constants are formatted in


def search(
    connection: BaseDatabaseWrapper, *, project_id: str, agent_id: str, terms: Sequence[str], limit: int
) -> list[Hit]:
    """The best `limit` passages of the agent's searchable sources for the query terms, best first. One query."""
    if not terms or limit < 1:
        return []
    params: dict[str, Any] = {
        "project": project_id,
        "agent": agent_id,
        "limit": limit,
        "query": " | ".join(_quote(term) for term in terms),
        "terms": list(terms),
    }
    with connection.cursor() as cursor:
        cursor.execute(_SEARCH, params)
        rows = cursor.fetchall()
    return [Hit(passage_id=r[0], source_id=r[1], title=r[2], text=r[3], score=float(r[4])) for r in rows]
