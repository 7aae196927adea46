"""What the model is shown of a knowledge search: shaped like an HTTP tool's result (seed "What the model sees").

`{"ok": true, "data": {"notice": DATA_NOTICE, "tool": "search_knowledge", "results": [{"title", "passage",
"source"}…]}}`: marked as data, not instructions; titles and passages cleaned like shaped values (control, bidi and
zero-width characters removed, Arabic joiners kept); the whole result under 4 KiB. A passage that doesn't fit in its
share is cut to the sentences around the query's words; when even that doesn't fit, whole results are dropped from
the end. Nothing found: the results are empty and a message says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

from agents.knowledge.index import Hit
from agents.knowledge.terms import terms
from tools.shaping import DATA_NOTICE, MAX_RESULT_BYTES, clean_text, clean_value

TOOL_NAME: Final = "search_knowledge"
NOTHING_FOUND: Final = "Nothing in the knowledge matches. Say you don't know rather than guessing."
OMITTED_NOTE: Final = "Some results were left out to keep the result short."
MIN_PASSAGE_BYTES: Final = 300  # a result that can't show this much of its passage is dropped instead
ELLIPSIS: Final = "…"
# linear: a run of one class, then a terminator it excludes, a newline or the end: it never backtracks
_SENTENCE_RE: Final = re.compile(r"[^.!?؟۔…\n]*(?:[.!?؟۔…]+|\n|$)")


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _utf8_len(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False)[1:-1].encode())


def _cut_words(text: str, budget: int) -> str:
    out = ""
    for word in text.split(" "):
        candidate = f"{out} {word}" if out else word
        if _utf8_len(candidate + ELLIPSIS) > budget:
            break
        out = candidate
    return out + ELLIPSIS if out else ""


def excerpt(text: str, query: Sequence[str], budget: int) -> str:
    """`text` if it fits in `budget` bytes (as JSON), else the run of sentences around the one that holds most of
    the query's terms, marked with … where it was cut."""
    if _utf8_len(text) <= budget:
        return text
    sentences = [s.strip() for s in _SENTENCE_RE.findall(text) if s.strip()]
    if not sentences:
        return _cut_words(text, budget)
    wanted = set(query)
    scores = [len(wanted.intersection(terms(sentence))) for sentence in sentences]
    best = max(range(len(sentences)), key=lambda i: (scores[i], -i))
    first = last = best
    if _utf8_len(sentences[best]) + 2 * len(ELLIPSIS.encode()) > budget:
        return _cut_words(sentences[best], budget - len(ELLIPSIS.encode()))

    def joined(a: int, b: int) -> str:
        body = " ".join(sentences[a : b + 1])
        return (ELLIPSIS + " " if a > 0 else "") + body + (" " + ELLIPSIS if b < len(sentences) - 1 else "")

    grew = True
    while grew:
        grew = False
        for a, b in ((first, last + 1), (first - 1, last)):
            if 0 <= a and b < len(sentences) and _utf8_len(joined(a, b)) <= budget:
                first, last, grew = a, b, True
    return joined(first, last)


def search_result(hits: Sequence[Hit], query: Sequence[str]) -> dict[str, Any]:
    """The model's view of the best passages, best first."""
    results = [
        {
            "title": clean_value(hit.title),
            "passage": clean_text(hit.text, keep_joiners=True).strip(),
            "source": hit.source_id,
        }
        for hit in hits
    ]
    data: dict[str, Any] = {"notice": DATA_NOTICE, "tool": TOOL_NAME, "results": results}
    result: dict[str, Any] = {"ok": True, "data": data}
    if not results:
        data["message"] = NOTHING_FOUND
        return result
    shown = len(results)
    while shown:
        data["results"] = _fit(results[:shown], query, omitted=shown < len(results))
        if data["results"] is not None:
            break
        shown -= 1
    if shown < len(results):
        data["results_omitted"] = len(results) - shown
        data["omitted_note"] = OMITTED_NOTE
    if not shown:
        data["results"] = []
        data["message"] = NOTHING_FOUND
    return result


def _fit(results: list[dict[str, Any]], query: Sequence[str], *, omitted: bool) -> list[dict[str, Any]] | None:
    """The results with passages cut so the whole stays under 4 KiB, or None if they can't all keep enough."""
    skeleton: dict[str, Any] = {
        "ok": True,
        "data": {
            "notice": DATA_NOTICE,
            "tool": TOOL_NAME,
            "results": [{**r, "passage": ""} for r in results],
        },
    }
    if omitted:
        skeleton["data"].update(results_omitted=99, omitted_note=OMITTED_NOTE)
    room = MAX_RESULT_BYTES - 1 - _size(skeleton)
    needs = [_utf8_len(r["passage"]) for r in results]
    if sum(needs) <= room:
        return results
    # Shares: the shortest passages are shown whole, the others split what is left equally.
    budgets = [0] * len(results)
    left, waiting = room, sorted(range(len(results)), key=lambda i: needs[i])
    while waiting:
        share = left // len(waiting)
        index = waiting.pop(0)
        budgets[index] = min(needs[index], share)
        left -= budgets[index]
    if min(budgets) < min(MIN_PASSAGE_BYTES, min(needs)):
        return None
    fitted = [{**r, "passage": excerpt(r["passage"], query, budgets[i])} for i, r in enumerate(results)]
    return fitted if _size({"ok": True, "data": {**skeleton["data"], "results": fitted}}) < MAX_RESULT_BYTES else None
