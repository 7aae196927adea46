"""How the guard reads one answer: `python -m guard.explain "I've cancelled your order." [--context '{…}']`.

For people writing a lexicon or a corpus line: each sentence as read, its clauses as the lexicons see them, and its
claims. `--context` is a corpus line's `context` (tests/truth/corpus/README.md); `--case ID` reads a corpus line.
"""

from __future__ import annotations

import argparse
import json

from guard.claims import Ground, clause_tokens, sentence_claims
from guard.corpus import cases, facts_of
from guard.lexicon import INDEX
from guard.reading import sentences
from guard.tokens import tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("text", nargs="?")
    parser.add_argument("--context", default="{}")
    parser.add_argument("--case")
    args = parser.parse_args()
    if args.case:
        case = next(c for c in cases() if c.id == args.case)
        text, facts = case.text, case.facts
        print(f"{case.id} [{case.group}] expect {'claim' if case.claim else 'pass'} {case.kind or ''}")
    else:
        text, facts = args.text or "", facts_of(json.loads(args.context))
    ground = Ground(facts)
    for sentence in sentences(text, INDEX.abbreviations):
        print(f"sentence: {sentence.text}{'   (asks)' if sentence.asks else ''}")
        toks = tokens(sentence.words)
        for language in INDEX.languages(toks):
            for clause in clause_tokens(toks, INDEX.lexicons[language]):
                print(f"  {language} clause:", " ".join("|" if token.startswith("\x00") else token for token in clause))
        for claim in sentence_claims(sentence, ground):
            print(f"  CLAIM {claim.kind}: {claim.text}")


if __name__ == "__main__":
    main()
