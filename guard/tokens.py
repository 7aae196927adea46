"""A word as the guard compares it, the same for a lexicon's entries (guard/lexicon.py) and an answer's rendered
words (guard/reading.py): its key (case folded, Latin accents dropped), the punctuation at its edges that ends a
clause part as `HARD` (`SOFT` marks where a join word splits a clause, guard/claims.py), its clitics split off."""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable
from typing import Final


@functools.lru_cache(maxsize=65536)
def key(word: str) -> str:
    """A word as lexicons and answers are compared: case folded, Latin accents dropped (Devanagari's signs kept)."""
    folded = word.casefold()
    if folded.isascii():
        return folded
    out: list[str] = []
    for char in unicodedata.normalize("NFD", folded):
        if unicodedata.category(char) == "Mn" and out and out[-1].isascii():
            continue
        out.append(char)
    return unicodedata.normalize("NFC", "".join(out))


# Punctuation that ends a clause part; any other punctuation at a word's edge is dropped when reading words.
HARD_MARKS: Final = frozenset(",;:()[]{}-—–،؛|/")
HARD: Final = "\x00hard"
SOFT: Final = "\x00soft"
_CLITICS: Final = frozenset({"ve", "re", "s", "m", "ll", "d"})
_TRAILING: Final = ".,;:!?)]}\"'"


def _peel(word: str) -> tuple[list[str], str, list[str]]:
    """Punctuation at a word's edges: (before, the word, after), each edge mark kept only if it breaks clauses."""
    start, end = 0, len(word)
    while start < end and _is_edge(word[start]) and word[start] != "#":
        if word[start] == "'" and (word[start + 1 :].rstrip(_TRAILING).lower() in _CLITICS or word[start:] == "n't"):
            break  # a lexicon's "'ll", "'ve": the clitic as an answer's "they'll" splits into
        start += 1
    while end > start and _is_edge(word[end - 1]) and word[end - 1] not in "%":
        end -= 1
    before = [char for char in word[:start] if char in HARD_MARKS]
    after = [char for char in word[end:] if char in HARD_MARKS]
    return before, word[start:end], after


def _is_edge(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"


def _split_clitics(word: str) -> list[str]:
    """English "haven't" is have + n't, "I've" is i + 've; French "j'ai" is j' + ai (either reads a lexicon's
    phrase the same way the lexicon wrote it)."""
    if word == "n't":
        return [word]
    if word.endswith("n't") and len(word) > 3:
        return [word[:-3], "n't"]
    cut = word.find("'")
    if 0 < cut < len(word) - 1:
        left, right = word[:cut], word[cut + 1 :]
        return [left, "'" + right] if right in _CLITICS else [left + "'", right]
    return [word]


def tokens(words: Iterable[str]) -> list[str]:
    """Rendered words as the lexicons are matched against: keys, clause marks as `HARD`."""
    out: list[str] = []
    for word in words:
        before, core, after = _peel(word)
        if before:
            out.append(HARD)
        if core:
            out.extend(_split_clitics(key(core)))
        if after:
            out.append(HARD)
    return out
