"""Search quality on a labelled set: customer questions in Arabic and English over a shop's help documents.

tests/agents/knowledge_set/: `docs/*.md` (20 documents, Arabic, English and one mixed; some long, one without
headings, one with bold-line questions), and `questions.json`: each question with the document that answers it and
a phrase of the answering passage. A question is found when one of the top 3 passages is of that document and
holds the phrase. Questions use other words than the documents, Arabic with and without diacritics, articles,
tatweel, alef and taa-marbuta variants and Arabic-Indic digits, English with other inflections.

Recall@3 must be at least 0.9.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agents import selectors, services
from agents.knowledge.terms import fold
from agents.models import Agent

SET = Path(__file__).with_name("knowledge_set")
MIN_RECALL = 0.9


def _flat(text: str) -> str:
    return " ".join(fold(text).split())


def load_set(project: Any, agent: Agent | None = None) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The documents as text sources of `project` (doc name -> source id), and the questions."""
    sources = {}
    for path in sorted((SET / "docs").glob("*.md")):
        content = path.read_text(encoding="utf-8")
        title = content.splitlines()[0].lstrip("# ").strip()
        source = services.knowledge_source_create(project=project, agent=agent, title=title, content=content)
        sources[path.stem] = source.pk
    return sources, json.loads((SET / "questions.json").read_text(encoding="utf-8"))


def recall_at_3(project: Any, agent: Agent, sources: dict[str, str], questions: list[dict[str, Any]]) -> list[str]:
    """The questions not found in the top 3, each with what came back instead."""
    misses = []
    for question in questions:
        hits = selectors.knowledge_search(project_id=project.pk, agent_id=agent.pk, query=question["q"], limit=3)
        wanted = [_flat(answer) for answer in question["answer"]]
        if not any(
            hit.source_id == sources[question["doc"]] and any(answer in _flat(hit.text) for answer in wanted)
            for hit in hits
        ):
            got = "; ".join(f"{hit.title} «{' '.join(hit.text.split())[:60]}…»" for hit in hits) or "nothing"
            misses.append(f"{question['q']!r} (wanted {question['doc']}: {question['answer'][0]!r}) got: {got}")
    return misses


@pytest.mark.django_db
def test_recall_at_3(alice: Any) -> None:
    agent = Agent.objects.create(project=alice.project, name="helpdesk")
    sources, questions = load_set(alice.project)
    assert len(sources) >= 15 and len(questions) >= 30
    misses = recall_at_3(alice.project, agent, sources, questions)
    recall = 1 - len(misses) / len(questions)
    report = f"recall@3: {recall:.3f} ({len(questions) - len(misses)}/{len(questions)})"
    print(report)
    for miss in misses:
        print("  missed:", miss)
    assert recall >= MIN_RECALL, report + "\n" + "\n".join(misses)
