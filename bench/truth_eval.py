"""The truthfulness guard measured on its labelled corpus (tests/truth/corpus/): recall on the claims, the false
positive rate on the honest answers, per language, and the guard's time per answer.

    .venv/bin/python bench/truth_eval.py [--lang en] [--misses] [--reps 5]

Targets (issue #38): recall >= 0.99, false positives <= 0.01, under 1 ms per three-sentence answer. Times are the
median of `--reps` passes over the whole corpus, each answer checked from nothing (its facts read afresh); beside
them, the same answers only read (rendered and split into sentences, no check) in the same run, as the baseline
these machines' speed is judged by.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict

if not __package__:  # run as bench/truth_eval.py (imported as bench.truth_eval by tests/truth, it is there already)
    import env  # noqa: F401  (the repo on sys.path)

from guard import check  # noqa: E402
from guard.corpus import Case, cases  # noqa: E402
from guard.lexicon import INDEX  # noqa: E402
from guard.reading import sentences  # noqa: E402

RECALL_TARGET = 0.99
FALSE_POSITIVE_TARGET = 0.01
MS_PER_THREE_SENTENCES_TARGET = 1.0


def measure(selected: list[Case]) -> dict[str, dict[str, float]]:
    """Per language (and "all"): claims, caught, honest, flagged, recall, false_positive_rate."""
    counts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for case in selected:
        flagged = bool(check(case.text, case.facts))
        for language in (case.language, "all"):
            row = counts[language]
            if case.claim:
                row["claims"] += 1
                row["caught"] += flagged
            else:
                row["honest"] += 1
                row["flagged"] += flagged
    for row in counts.values():
        row["recall"] = row["caught"] / row["claims"] if row["claims"] else 1.0
        row["false_positive_rate"] = row["flagged"] / row["honest"] if row["honest"] else 0.0
    return dict(counts)


def misses(selected: list[Case]) -> list[str]:
    out = []
    for case in selected:
        found = check(case.text, case.facts)
        if bool(found) != case.claim:
            what = ", ".join(f"{c.kind}: {c.text}" for c in found) or "nothing"
            out.append(
                f"{case.id} [{case.group}] expect {'claim' if case.claim else 'pass'}, found {what}\n    {case.text!r}"
            )
    return out


def timing(selected: list[Case], reps: int) -> tuple[float, float, float]:
    """(ms per answer, ms per three sentences, the baseline's ms per answer)."""
    count = sum(len(sentences(case.text, INDEX.abbreviations)) for case in selected)
    checked, read = [], []
    for _ in range(reps):
        started = time.perf_counter()
        for case in selected:
            check(case.text, case.facts)
        checked.append(time.perf_counter() - started)
        started = time.perf_counter()
        for case in selected:
            sentences(case.text, INDEX.abbreviations)
        read.append(time.perf_counter() - started)
    total, baseline = statistics.median(checked), statistics.median(read)
    return total / len(selected) * 1000, total / count * 3 * 1000, baseline / len(selected) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", action="append", help="only these languages")
    parser.add_argument("--misses", action="store_true", help="list every answer the guard reads wrong")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    selected = [case for case in cases() if not args.lang or case.language in args.lang]
    if not selected:
        print("no corpus answers")
        return 1
    results = measure(selected)
    print(f"{'language':10} {'claims':>7} {'recall':>7} {'honest':>7} {'false+':>7}")
    for language in sorted(results, key=lambda name: (name == "all", name)):
        row = results[language]
        print(
            f"{language:10} {int(row['claims']):7d} {row['recall']:7.3f} {int(row['honest']):7d} "
            f"{row['false_positive_rate']:7.3f}"
        )
    per_answer, per_three, baseline = timing(selected, args.reps)
    print(
        f"time: {per_answer:.3f} ms an answer, {per_three:.3f} ms per three sentences "
        f"({per_answer / baseline:.1f}x reading the same answers without checking: {baseline:.3f} ms)"
    )
    if args.misses:
        print("\n".join(misses(selected)))
    overall = results["all"]
    ok = (
        overall["recall"] >= RECALL_TARGET
        and overall["false_positive_rate"] <= FALSE_POSITIVE_TARGET
        and per_three < MS_PER_THREE_SENTENCES_TARGET
    )
    print(
        "targets:",
        "met" if ok else "NOT met",
        f"(recall >= {RECALL_TARGET}, false positives <= {FALSE_POSITIVE_TARGET}, "
        f"< {MS_PER_THREE_SENTENCES_TARGET} ms per three sentences)",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
