"""The words of the guard: one lexicon a language, data in `guard/lexicons/<language>.toml`, loaded once at start.

What an answer claims is read from these words, not from code: adding a language is adding a file, and a missed
phrasing is a line in one. A lexicon holds (each key optional but `language`, `name` and `claims`; every entry is a
word or a phrase of words; in a phrase, `*` stands for up to three words of any kind):

- `claims`: `[[claims]]` tables, each a `concept` (one of `CONCEPTS`) with `forms` (words that say on their own that
  it was done: "storniert", "iptal edildi", "تم الغاء") and `after_perfective` (words that say so only after one of
  the `perfective` or `state` words, or, where `telegraphic` is on, opening a clause or ending a short one:
  English's "cancelled" is done in "I've cancelled", "it was cancelled", "Order cancelled." and not in "cancelled
  orders are refunded"). Every inflection is listed: nothing is stemmed.
- the scope of a claim: `negations` (in its clause part: it did not happen, it failed), `negations_before` (right
  before it only: Gulf Arabic's ما, which is also "what"), `irrealis` (one of the four
  words before it: a future, a possibility, a wish, an offer, a request), `irrealis_after` (one of the two words
  after it, for verb-final languages: "storniert werden"), `conditions` (a clause opening with one states no fact),
  `questions` (a clause opening with one asks, in a sentence ending on a question mark), `alternatives` (in a
  sentence ending on a question mark, one of these — "or" — makes every clause of it part of the question:
  "Has the refund arrived, or do you still see nothing?"), `habitual` (in its clause:
  a rule of the business, not this customer's case: "refunds are processed within 5 days"), `business_things`
  (in its clause: the business speaks of its own things, not the customer's: "we've updated our opening hours"),
  `perfective` and
  `state` (see `after_perfective`; `state` words don't count in a habitual clause), `telegraphic`.
- clauses: `breaks` (words that end a clause: "but", "so", "that"; `,` `;` `:` `(` `)` and dashes always do) and
  `joins` (words that join two parts of one clause: "and", "or": a negation stays in its part, an irrealis word
  reaches across), `prefixes` (letters attached to a word that may be read without it: Arabic's و and ف).
- sentences: `abbreviations` (words ending in a dot that end no sentence: "no.", "z.b.").
- references and figures: `reference_words` (a number after one is a reference: "order", "ticket", "رقم"),
  `ticket_words` (an action on one of these is a ticket: "I've opened a case"; a reference after one is a ticket's
  number), `team_words` (a handoff or a follow-up names one: "team", "agent", "فريق"), `structural` (a number after
  one numbers the answer's own parts: "step 2"), `numbers` (number words and their values, compared as values with
  digits: "thirty" is 30), `multipliers` (words that multiply the number before them: "hundred", "ribu", "yüz"),
  `units` (a number word before one is a figure: "thirty days").

`LEXICONS` is every file, read and checked when this module is imported (a lexicon that can't be read stops the
process: a guard without its words would pass everything); `INDEX` is them merged for reading an answer once.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from guard.reading import render_word
from guard.tokens import HARD, tokens

LEXICON_DIR: Final = Path(__file__).with_name("lexicons")

# Special concepts are backed by their own facts (guard/claims.py); every other is an action on the customer's case,
# backed by a succeeded action call (or said back from a lookup that reported it).
SPECIAL_CONCEPTS: Final = frozenset({"done", "confirm", "handoff", "ticket", "followup"})
ACTION_CONCEPTS: Final = frozenset(
    {
        "cancel", "refund", "change", "update", "book", "reschedule", "send", "create", "reset", "remove", "add",
        "apply", "activate", "deactivate", "process", "replace", "pay", "register", "return", "block", "unblock",
        "subscribe", "unsubscribe", "upgrade", "downgrade", "restore", "approve", "issue", "credit", "waive",
        "extend", "close", "reopen", "schedule", "verify", "order",
    }
)  # fmt: skip
CONCEPTS: Final = SPECIAL_CONCEPTS | ACTION_CONCEPTS

_WORD_LISTS: Final = (
    "abbreviations", "breaks", "joins", "negations", "negations_before", "irrealis", "irrealis_after",
    "conditions", "questions", "habitual", "business_things", "perfective", "state", "prefixes", "reference_words",
    "ticket_words", "team_words", "structural", "units", "alternatives",
)  # fmt: skip
_KEYS: Final = frozenset({"language", "name", "telegraphic", "numbers", "multipliers", "claims", *_WORD_LISTS})
GAP: Final = "*"
MAX_GAP: Final = 3


class LexiconError(ValueError):
    """A lexicon file that can't be used, with the file and the place."""


def phrase(text: str) -> tuple[str, ...]:
    """A lexicon entry as the tokens it matches (read exactly as an answer is); `*` stays a gap."""
    found: list[str] = []
    for piece in text.split():
        if piece == GAP:
            found.append(GAP)
        else:
            found.extend(_entry_word(piece))
    return tuple(found)


@functools.lru_cache(maxsize=65536)
def _entry_word(piece: str) -> tuple[str, ...]:
    """One word of a lexicon entry as its tokens (the lexicons repeat their words: each is read once)."""
    return tuple(tok for tok in tokens(render_word(piece)) if tok != HARD)


@dataclasses.dataclass(frozen=True, eq=False)
class Form:
    """One way a language says a concept was done."""

    language: str
    concept: str
    tokens: tuple[str, ...]
    after_perfective: bool

    @functools.cached_property
    def gapped(self) -> bool:
        return GAP in self.tokens


class Phrases:
    """One word list, for reading: its one-word entries as a set, its longer ones by their first word."""

    def __init__(self, entries: frozenset[tuple[str, ...]], prefixes: tuple[str, ...] = ()) -> None:
        self.entries = entries
        self.singles = frozenset(entry[0] for entry in entries if len(entry) == 1)
        longer: dict[str, list[tuple[str, ...]]] = {}
        for entry in entries:
            if len(entry) > 1:
                longer.setdefault(entry[0], []).append(entry)
        self.longer = {first: tuple(found) for first, found in longer.items()}
        self.prefixes = prefixes

    def _bare(self, token: str) -> str | None:
        for prefix in self.prefixes:
            if len(token) > len(prefix) + 1 and token.startswith(prefix):
                return token[len(prefix) :]
        return None

    def has(self, token: str) -> bool:
        """`token` is a one-word entry (an attached prefix may be read off first)."""
        if token in self.singles:
            return True
        bare = self._bare(token) if self.prefixes else None
        return bare is not None and bare in self.singles

    def at(self, part: list[str], position: int) -> bool:
        """An entry starts at `part[position]`."""
        token = part[position]
        if self.has(token):
            return True
        for entry in self.longer.get(token, ()):
            if tuple(part[position : position + len(entry)]) == entry:
                return True
        return False

    def opens(self, part: list[str]) -> bool:
        return bool(part) and self.at(part, 0)

    def within(self, part: list[str]) -> bool:
        """An entry is anywhere in `part`."""
        return any(self.at(part, position) for position in range(len(part)))

    def ends(self, part: list[str]) -> bool:
        """A longer entry ends `part` ("went ahead" right before a form)."""
        return any(
            len(part) >= len(entry) and tuple(part[-len(entry) :]) == entry
            for found in self.longer.values()
            for entry in found
        )


@dataclasses.dataclass(frozen=True)
class Lexicon:
    language: str
    name: str
    telegraphic: bool
    forms: tuple[Form, ...]
    words: Mapping[str, frozenset[tuple[str, ...]]]  # each word list as phrases
    abbreviations: frozenset[str]  # as the reader compares them: lower case, with their dot
    numbers: Mapping[str, int]
    multipliers: Mapping[str, int] = dataclasses.field(default_factory=dict)
    lists: Mapping[str, Phrases] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        prefixes = tuple(sorted((entry[0] for entry in self.words["prefixes"]), key=len, reverse=True))
        object.__setattr__(self, "lists", {kind: Phrases(entries, prefixes) for kind, entries in self.words.items()})

    def has(self, kind: str, token: str) -> bool:
        """The one-word entry `token` is in the list `kind` (an attached prefix may be read off first)."""
        return self.lists[kind].has(token)

    def opens(self, kind: str, part: list[str]) -> bool:
        """`part` starts with a phrase of the list `kind`."""
        return self.lists[kind].opens(part)


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise LexiconError(f"{where}: a list of non-empty strings")
    return value


def load(path: Path) -> Lexicon:
    where = path.name
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LexiconError(f"{where}: {exc}") from exc
    unknown = set(data) - _KEYS
    if unknown:
        raise LexiconError(f"{where}: unknown keys {sorted(unknown)}")
    language = data.get("language")
    if not isinstance(language, str) or language != path.stem:
        raise LexiconError(f"{where}: `language` must be the file's name ({path.stem})")
    words = {
        kind: frozenset(entry for item in _strings(data.get(kind, []), f"{where} {kind}") if (entry := phrase(item)))
        for kind in _WORD_LISTS
        if kind != "abbreviations"
    }
    abbreviations = frozenset(
        "".join(render_word(item)).lower() for item in _strings(data.get("abbreviations", []), f"{where} abbreviations")
    )
    if any(not item.endswith(".") for item in abbreviations):
        raise LexiconError(f"{where} abbreviations: each ends in a dot")
    numbers: dict[str, int] = {}
    multipliers: dict[str, int] = {}
    for word, value in (data.get("multipliers") or {}).items():
        found = phrase(word)
        if not isinstance(value, int) or isinstance(value, bool) or value < 2 or len(found) != 1:
            raise LexiconError(f"{where} multipliers.{word}: one word, a whole number of at least 2")
        multipliers[found[0]] = value
    for word, value in (data.get("numbers") or {}).items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise LexiconError(f"{where} numbers.{word}: a whole number")
        found = phrase(word)
        if len(found) != 1:
            raise LexiconError(f"{where} numbers.{word}: one word")
        numbers[found[0]] = value
    forms: list[Form] = []
    for index, entry in enumerate(data.get("claims") or []):
        place = f"{where} claims[{index}]"
        concept = entry.get("concept")
        if concept not in CONCEPTS:
            raise LexiconError(f"{place}: concept {concept!r} is not one of guard.lexicon.CONCEPTS")
        if set(entry) - {"concept", "forms", "after_perfective"}:
            raise LexiconError(f"{place}: unknown keys {sorted(set(entry) - {'concept', 'forms', 'after_perfective'})}")
        for kind, after in (("forms", False), ("after_perfective", True)):
            for text in _strings(entry.get(kind, []), f"{place} {kind}"):
                toks = phrase(text)
                if not toks or toks[0] == GAP or toks[-1] == GAP:
                    raise LexiconError(f"{place} {kind}: {text!r} must start and end on a word")
                forms.append(Form(language, concept, toks, after))
    if not forms:
        raise LexiconError(f"{where}: no claims")
    return Lexicon(
        language=language,
        name=str(data.get("name") or language),
        telegraphic=bool(data.get("telegraphic", False)),
        forms=tuple(forms),
        words=words,
        abbreviations=abbreviations,
        numbers=numbers,
        multipliers=multipliers,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class Index:
    """Every lexicon merged for one pass over an answer."""

    lexicons: Mapping[str, Lexicon]
    forms: Mapping[str, tuple[Form, ...]]  # by the form's first token
    prefixes: tuple[str, ...]
    abbreviations: frozenset[str]  # as the reader compares them: lower case, accents kept
    reference_words: frozenset[str]
    ticket_words: Phrases
    team_words: Phrases
    structural: frozenset[str]
    units: frozenset[str]
    numbers: Mapping[str, int]
    multipliers: Mapping[str, int]

    # language -> first token -> (forms by their second token, forms of one token or with a gap second)
    by_language: Mapping[str, Mapping[str, tuple[Mapping[str, tuple[Form, ...]], tuple[Form, ...]]]] = (
        dataclasses.field(default_factory=dict)
    )
    number_words: frozenset[str] = frozenset()  # every number word and multiplier of every language
    languages_at: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # first word -> languages
    vocabulary: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)  # language -> its words

    @functools.cached_property
    def _prefix_starts(self) -> frozenset[str]:
        return frozenset(prefix[:1] for prefix in self.prefixes)

    def languages(self, tokens: list[str]) -> list[str]:
        """The languages with a form that may start at one of `tokens`, among those the sentence is written in: the
        ones whose words (word lists and forms) it uses most (a Portuguese form is not read in a Spanish sentence,
        whose words it shares); all of them when it uses no lexicon's words."""
        found: set[str] = set()
        for token in tokens:
            for head in self.heads(token):
                found.update(self.languages_at.get(head, ()))
        if len(found) < 2:
            return sorted(found)
        scores = {language: sum(token in self.vocabulary[language] for token in tokens) for language in found}
        best = max(scores.values())
        if best == 0:
            return sorted(found)
        return sorted(language for language, score in scores.items() if score >= best)

    def heads(self, token: str) -> tuple[str, ...]:
        """`token` as a form's first word may be: itself, and without an attached prefix."""
        if not self.prefixes or token[:1] not in self._prefix_starts:
            return (token,)
        found: tuple[str, ...] = (token,)
        for prefix in self.prefixes:
            if len(token) > len(prefix) + 1 and token.startswith(prefix):
                found += (token[len(prefix) :],)
        return found

    def candidates(self, token: str, language: str | None = None) -> tuple[Form, ...]:
        """The forms that may start at `token` (an attached prefix read off too), of one language or all."""
        found: tuple[Form, ...] = ()
        for head in self.heads(token):
            found += self.forms.get(head, ())
        return found if language is None else tuple(form for form in found if form.language == language)

    def starting(self, tokens: list[str], position: int, language: str) -> tuple[Form, ...]:
        """The forms of `language` that may match from `tokens[position]`, told apart by the word after it."""
        table = self.by_language.get(language)
        if table is None:
            return ()
        following = tokens[position + 1] if position + 1 < len(tokens) else None
        found: tuple[Form, ...] = ()
        for head in self.heads(tokens[position]):
            entry = table.get(head)
            if entry is not None:
                by_second, rest = entry
                found += rest + (by_second.get(following, ()) if following is not None else ())
        return found


def _singles(lexicons: Iterable[Lexicon], kind: str) -> frozenset[str]:
    return frozenset(entry[0] for lexicon in lexicons for entry in lexicon.words[kind] if len(entry) == 1)


def build(lexicons: Mapping[str, Lexicon]) -> Index:
    forms: dict[str, list[Form]] = {}
    for lexicon in lexicons.values():
        for form in lexicon.forms:
            forms.setdefault(form.tokens[0], []).append(form)
    for lexicon in lexicons.values():
        # A language's clauses are split by its own breaks and joins: a form may hold another language's.
        cuts = lexicon.lists["breaks"].singles | lexicon.lists["joins"].singles
        for form in lexicon.forms:
            inside = [tok for tok in form.tokens[1:-1] if tok in cuts]
            if inside:
                raise LexiconError(
                    f"{lexicon.language}.toml: the form {' '.join(form.tokens)!r} holds {inside[0]!r}, which the "
                    "lexicon lists as a clause break or join: the form could never be read whole"
                )
    abbreviations = frozenset(word for lexicon in lexicons.values() for word in lexicon.abbreviations)
    by_language: dict[str, dict[str, tuple[dict[str, tuple[Form, ...]], tuple[Form, ...]]]] = {}
    for lexicon in lexicons.values():
        seconds: dict[str, dict[str, list[Form]]] = {}
        rest: dict[str, list[Form]] = {}
        for form in lexicon.forms:
            first = form.tokens[0]
            if len(form.tokens) > 1 and form.tokens[1] != GAP:
                seconds.setdefault(first, {}).setdefault(form.tokens[1], []).append(form)
            else:
                rest.setdefault(first, []).append(form)
        by_language[lexicon.language] = {
            first: (
                {second: tuple(found) for second, found in seconds.get(first, {}).items()},
                tuple(rest.get(first, ())),
            )
            for first in set(seconds) | set(rest)
        }
    return Index(
        lexicons=dict(lexicons),
        forms={first: tuple(found) for first, found in forms.items()},
        prefixes=tuple(sorted(_singles(lexicons.values(), "prefixes"), key=len, reverse=True)),
        abbreviations=abbreviations,
        reference_words=_singles(lexicons.values(), "reference_words"),
        ticket_words=Phrases(frozenset(entry for lex in lexicons.values() for entry in lex.words["ticket_words"])),
        team_words=Phrases(frozenset(entry for lex in lexicons.values() for entry in lex.words["team_words"])),
        structural=_singles(lexicons.values(), "structural"),
        units=_singles(lexicons.values(), "units"),
        numbers={word: value for lexicon in lexicons.values() for word, value in lexicon.numbers.items()},
        multipliers={word: value for lexicon in lexicons.values() for word, value in lexicon.multipliers.items()},
        by_language=by_language,
        languages_at={first: tuple(sorted({form.language for form in found})) for first, found in forms.items()},
        number_words=frozenset(
            word for lexicon in lexicons.values() for word in (*lexicon.numbers, *lexicon.multipliers)
        ),
        vocabulary={
            lexicon.language: frozenset(
                {tok for entries in lexicon.words.values() for entry in entries for tok in entry if tok != GAP}
                | {tok for form in lexicon.forms for tok in form.tokens if tok != GAP}
                | set(lexicon.numbers)
            )
            for lexicon in lexicons.values()
        },
    )


def load_all(directory: Path = LEXICON_DIR) -> dict[str, Lexicon]:
    return {path.stem: load(path) for path in sorted(directory.glob("*.toml"))}


TOOLS_PATH: Final = Path(__file__).with_name("tools.toml")
# Concepts any succeeded action call backs, whatever it is named: processing, confirming, approving.
GENERIC_CONCEPTS: Final = frozenset({"process", "confirm", "approve", "issue"})


def load_tool_words(path: Path = TOOLS_PATH) -> dict[str, frozenset[str]]:
    """Tool-name word -> the action concepts a tool so named carries out (guard/tools.toml)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    words: dict[str, set[str]] = {}
    for concept, names in (data.get("concepts") or {}).items():
        if concept not in ACTION_CONCEPTS:
            raise LexiconError(f"{path.name}: concept {concept!r} is not an action of guard.lexicon.CONCEPTS")
        for name in _strings(names, f"{path.name} {concept}"):
            words.setdefault(name.lower(), set()).add(concept)
    return {word: frozenset(concepts) for word, concepts in words.items()}


def tool_concepts(name: str, tool_words: Mapping[str, frozenset[str]]) -> frozenset[str] | None:
    """The action concepts a tool's name names ("update_address" -> change, update, …), None when it names none."""
    spaced = "".join(f" {char.lower()}" if char.isupper() else char for char in name)
    parts = [part for part in spaced.replace("-", " ").replace(".", " ").replace("_", " ").split() if part]
    found: set[str] = set()
    for index, part in enumerate(parts):
        found |= tool_words.get(part, frozenset())
        if index + 1 < len(parts):
            found |= tool_words.get(f"{part}_{parts[index + 1]}", frozenset())
    return frozenset(found) if found else None


LEXICONS: Final = load_all()
INDEX: Final = build(LEXICONS)
TOOL_WORDS: Final = load_tool_words()
