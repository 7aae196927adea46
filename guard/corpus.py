"""The labelled corpus (tests/truth/corpus/): its answers with their conversations as the guard's `Facts`.

Read by `bench/truth_eval.py` and `tests/truth/test_corpus.py`; the format is the corpus folder's README.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from guard.facts import Call, Facts

CORPUS_DIR = Path(__file__).resolve().parent.parent / "tests" / "truth" / "corpus"
BUILTIN_TOOLS = frozenset({"create_ticket", "transfer_to_human", "flag_conversation", "search_knowledge"})


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    language: str
    group: str
    claim: bool
    kind: str | None
    text: str
    facts: Facts


def facts_of(context: dict[str, Any]) -> Facts:
    calls = tuple(
        Call(
            name=str(tool.get("name", "")),
            effect=str(tool.get("effect", "read")),
            succeeded=tool.get("status", "succeeded") == "succeeded",
            result=tool.get("result"),
            receipt=tool.get("receipt"),
            builtin=tool.get("name") in BUILTIN_TOOLS,
            knowledge=tool.get("name") == "search_knowledge",
        )
        for tool in context.get("tools") or ()
    )
    instructions = context.get("instructions")
    return Facts(
        instructions=(instructions,) if instructions else (),
        customer=tuple(context.get("customer") or ()),
        knowledge=tuple(context.get("knowledge") or ()),
        calls=calls,
    )


def cases(directory: Path = CORPUS_DIR) -> Iterator[Case]:
    for path in sorted(directory.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            yield Case(
                id=str(row.get("id") or f"{path.stem}:{number}"),
                language=str(row.get("lang") or path.stem),
                group=str(row.get("group", "")),
                claim=row["expect"] == "claim",
                kind=row.get("kind"),
                text=row["text"],
                facts=facts_of(row.get("context") or {}),
            )
