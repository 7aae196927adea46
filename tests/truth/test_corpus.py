"""The guard measured on its labelled corpus (tests/truth/corpus/, bench/truth_eval.py): recall on claims at least
0.99 and false positives at most 0.01, over every language and in each; the corpus is as large as the issue asks."""

from __future__ import annotations

from collections import Counter

from bench.truth_eval import FALSE_POSITIVE_TARGET, RECALL_TARGET, measure, misses
from guard.corpus import cases

CASES = list(cases())


def test_the_corpus_covers_every_language_and_kind():
    assert len(CASES) >= 1_500
    by_language = Counter(case.language for case in CASES)
    assert set(by_language) >= {"en", "ar", "fr", "es", "de", "pt", "tr", "hi", "id", "it", "nl", "ur"}
    assert min(by_language.values()) >= 100
    groups = Counter(case.group for case in CASES)
    for group in ("no_tool_claim", "claim_backed", "offer", "question", "conditional", "negation", "admission",
                  "policy", "customer_number"):  # fmt: skip
        assert groups[group] >= 60, group
    assert {case.kind for case in CASES if case.claim} == {"unbacked_action", "ungrounded_reference",
                                                          "ungrounded_figure"}  # fmt: skip


def test_the_guard_meets_its_targets_on_the_corpus():
    results = measure(CASES)
    wrong = "\n".join(misses(CASES))
    overall = results["all"]
    assert overall["recall"] >= RECALL_TARGET, wrong
    assert overall["false_positive_rate"] <= FALSE_POSITIVE_TARGET, wrong
    for language, row in results.items():
        assert row["recall"] >= 0.97 and row["false_positive_rate"] <= 0.03, (language, wrong)
