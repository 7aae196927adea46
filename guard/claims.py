"""What one sentence claims, and whether the conversation backs it.

Three kinds (SPEC §5), each decided by where the fact came from, not by a list of phrasings:
- `ungrounded_reference`: a reference-like token (letters and digits mixed, `#` and digits, five digits and more,
  or any number after a reference word: "order", "ticket", "رقم") that appears in no source (guard/facts.py); one
  presented as a ticket's (after a ticket word, or `TKT-…`) must come from a ticket source: a ticket tool, a result
  under a ticket-like key, the customer's own words, the customer's tickets.
- `ungrounded_figure`: any other number stated as a fact (an amount, a price, a window, a duration, a date, a
  count; in digits, or a number word before a unit: "thirty days") whose value appears in no source. A question
  states no figure; a number after a structural word ("step 2") numbers the answer's own parts.
- `unbacked_action`: a statement that an action was carried out, found with the lexicons (guard/lexicon.py) and
  read in its scope — its clause part's negation, a leading condition, a question, the irrealis words before it
  (a future, an offer, a possibility), a habitual rule of the business — unless a call of a matching effect
  succeeded: a handoff needs a handoff (or the team holding the conversation), a ticket a ticket tool (or one of
  the business's own action tools), the team's follow-up either, "done" any successful call, any other action a
  succeeded action call or a lookup that reported it done ("status": "cancelled" backs "your order was
  cancelled"). Right after a call failed (nothing succeeded after it), an action claimed done is a claim whatever
  succeeded before.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

from guard import figures
from guard.facts import Evidence, Facts
from guard.lexicon import CONCEPTS, GAP, INDEX, MAX_GAP, Form, Index, Lexicon, Phrases
from guard.reading import Sentence, sentences
from guard.tokens import HARD, SOFT, key, tokens

UNBACKED_ACTION = "unbacked_action"
UNGROUNDED_REFERENCE = "ungrounded_reference"
UNGROUNDED_FIGURE = "ungrounded_figure"
UNCHECKED = "unchecked"
KINDS = (UNBACKED_ACTION, UNGROUNDED_REFERENCE, UNGROUNDED_FIGURE, UNCHECKED)
_TEXT_MAX = 160
_EDGE = ".,;:!?()[]{}\"'«»“”‘’¿¡*"
_NOT_TICKET_CONCEPTS = frozenset({"handoff", "followup", "done", "confirm"})
_NOT_RELAYED = frozenset({"handoff", "followup", "ticket", "done"})
_AFTER = frozenset(CONCEPTS) - {"handoff", "followup", "ticket", "confirm"}  # claimed done despite a failure


@dataclasses.dataclass(frozen=True)
class Claim:
    kind: str
    text: str  # what the answer said, as the customer reads it (a long one cut: a 5,000-digit number is no list)
    # The tool whose failed call came last (for the push-back's words, not the API): not part of what it claims.
    after_failure: str = dataclasses.field(default="", compare=False)

    @staticmethod
    def of(kind: str, text: str, limit: int = 40, after_failure: str = "") -> Claim:
        return Claim(kind, text if len(text) <= limit else text[: limit - 1] + "…", after_failure)

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text}


class Ground:
    """The evidence of one answer's facts, read when first needed: this run's first, then with the segment's
    earlier calls for what this run's don't back (a query, asked at most once)."""

    def __init__(self, facts: Facts, index: Index = INDEX) -> None:
        # Each lookup may cost a query: asked at most once for the whole answer.
        self.facts = dataclasses.replace(
            facts,
            earlier_calls=functools.cache(facts.earlier_calls),
            ticket_numbers=functools.cache(facts.ticket_numbers),
            handed_off=functools.cache(facts.handed_off),
        )
        self.index = index
        self.deadline = float("inf")  # time.monotonic() past which reading stops (TimeoutError): the stream's budget
        self._first: Evidence | None = None
        self._full: Evidence | None = None
        self._relayed: dict[int, frozenset[str]] = {}

    def last_failed(self) -> str:
        """The tool whose failed call came last, with nothing succeeded after it ("" when none)."""
        evidence = self._full or self._first
        return (evidence.last_failed or "") if evidence is not None else ""

    def relayed(self, evidence: Evidence) -> frozenset[str]:
        """The actions a tool result itself states as done ("status": "Cancelled", "The order has already shipped"),
        read with the same scope as an answer: a failure message's "could not be cancelled" states nothing done."""
        found = self._relayed.get(id(evidence))
        if found is None:
            concepts: set[str] = set()
            for text in evidence.results:
                for sentence in sentences(text, self.index.abbreviations):
                    concepts.update(_actions(sentence, self.index))
            found = self._relayed[id(evidence)] = frozenset(concepts - _NOT_RELAYED)
        return found

    def holds(self, test: Callable[..., bool], *args: Any) -> bool:
        """`test(evidence, *args)` on this run's evidence, else on the segment's."""
        if self._first is None:
            self._first = Evidence(self.facts, self.index)
        if test(self._first, *args):
            return True
        if self._full is None:
            self._full = Evidence(self.facts, self.index, with_earlier=True)
        return test(self._full, *args)


# --- actions ---------------------------------------------------------------------------------------------------


def clause_tokens(toks: list[str], lexicon: Lexicon) -> list[list[str]]:
    """A sentence's clauses as `lexicon`'s language splits them, each a list of tokens with `SOFT` where a join word
    stood (a break word opens the clause it starts)."""
    breaks, joins = lexicon.lists["breaks"], lexicon.lists["joins"]
    clauses: list[list[str]] = [[]]
    for position, token in enumerate(toks):
        if token == HARD:
            if clauses[-1]:
                clauses.append([])
        elif joins.has(token):
            if clauses[-1] and clauses[-1][-1] != SOFT:
                clauses[-1].append(SOFT)
        elif breaks.at(toks, position):
            if clauses[-1]:
                clauses.append([])
            clauses[-1].append(token)
        else:
            clauses[-1].append(token)
    return [clause for clause in clauses if clause]


def _match(clause: list[str], start: int, form: Form) -> int | None:
    """Where `form` matching from `start` ends (exclusive), or None; a gap skips up to MAX_GAP words, never a join."""
    if not form.gapped:
        end = start + len(form.tokens)
        if end <= len(clause) and tuple(clause[start + 1 : end]) == form.tokens[1:]:
            return end
        return None
    if form.tokens[-1] not in clause[start + 1 : start + len(form.tokens) + MAX_GAP * form.tokens.count(GAP)]:
        return None  # its last word is not within reach

    def at(position: int, part: int) -> int | None:
        if part == len(form.tokens):
            return position
        wanted = form.tokens[part]
        if wanted == GAP:
            for skip in range(MAX_GAP + 1):
                if position + skip > len(clause) or SOFT in clause[position : position + skip]:
                    break
                end = at(position + skip, part + 1)
                if end is not None:
                    return end
            return None
        if position < len(clause) and (clause[position] == wanted or (part == 0 and position == start)):
            return at(position + 1, part + 1)
        return None

    return at(start, 0)


def _contains(lexicon: Lexicon, kind: str, part: list[str]) -> bool:
    return lexicon.lists[kind].within(part)


class _Clause:
    """One clause's tokens, with what its checks read more than once computed once (a long clause costs linear
    time, not a scan per word)."""

    def __init__(self, tokens: list[str], index: Index) -> None:
        self.tokens = tokens
        self.index = index
        self.words = [token for token in tokens if token != SOFT]
        # Each token's position among the words, and where its part (between joins) starts and ends.
        self.word_at: list[int] = []
        self.part_start: list[int] = []
        self.part_end: list[int] = [0] * len(tokens)
        count, begin = 0, 0
        for position, token in enumerate(tokens):
            if token == SOFT:
                begin = position + 1
            self.part_start.append(begin)
            self.word_at.append(count)
            count += token != SOFT
        finish = len(tokens)
        for position in range(len(tokens) - 1, -1, -1):
            if tokens[position] == SOFT:
                finish = position
            self.part_end[position] = finish
        self._cache: dict[tuple[str, str, int], bool] = {}

    def has(self, lexicon: Lexicon, kind: str, part: int = -1) -> bool:
        """The list `kind` has an entry in the whole clause (part -1) or in the part starting at `part`."""
        found = self._cache.get((lexicon.language, kind, part))
        if found is None:
            span = self.words if part < 0 else self.tokens[part : self.part_end[part]]
            found = self._cache[(lexicon.language, kind, part)] = lexicon.lists[kind].within(span)
        return found

    def opens(self, lexicon: Lexicon, kind: str, part: int = -1) -> bool:
        return lexicon.lists[kind].opens(self.words if part < 0 else self.tokens[part : self.part_end[part]])

    def names(self, phrases: Phrases, part: int) -> bool:
        """`phrases` has an entry in the whole clause (part -1) or in the part starting at `part`."""
        return phrases.within(self.words if part < 0 else self.tokens[part : self.part_end[part]])


def _done_here(lexicon: Lexicon, form: Form, clause: _Clause, start: int, end: int, *, asks: bool, last: bool) -> bool:
    """The form found at clause.tokens[start:end] says, in its scope, that it was done."""
    part = clause.part_start[start]
    part_end = clause.part_end[start]
    # A negation in the form itself belongs to it ("won't renew anymore" says it was cancelled).
    negated = clause.has(lexicon, "negations", part)
    if negated and any(token in lexicon.lists["negations"].singles for token in form.tokens):
        outside = clause.tokens[part:start] + clause.tokens[end:part_end]
        negated = lexicon.lists["negations"].within(outside)
    if negated or clause.has(lexicon, "business_things"):
        return False
    if clause.opens(lexicon, "conditions") or clause.opens(lexicon, "conditions", part):
        return False
    if asks and (last or clause.opens(lexicon, "questions")):
        return False
    at = clause.word_at[start]
    before = clause.words[max(0, at - 4) : at]
    if before and lexicon.has("negations_before", before[-1]):
        return False
    if _contains(lexicon, "irrealis", before):
        return False
    after_at = clause.word_at[end] if end < len(clause.tokens) else len(clause.words)
    after = clause.words[after_at : after_at + 2]
    if after and _contains(lexicon, "irrealis_after", after):
        return False
    strong = _contains(lexicon, "perfective", before[-3:]) or lexicon.lists["perfective"].ends(before)
    # A handoff or the team's promise stays one with a time frame ("within 24 hours").
    habitual = clause.has(lexicon, "habitual") and form.concept not in ("handoff", "followup")
    if not form.after_perfective:
        return strong or not habitual
    if strong:
        return True
    if habitual:
        return False
    if _contains(lexicon, "state", before[-3:]):
        return True
    return lexicon.telegraphic and (start == part or (end == part_end and part_end - part <= 3))


def _actions(sentence: Sentence, index: Index, deadline: float = float("inf")) -> list[str]:
    """The concepts this sentence says were done, each language's forms read in that language's clauses. Raises
    TimeoutError past `deadline` (looked at every 64 words)."""
    found: list[str] = []
    toks = tokens(sentence.words)
    languages = index.languages(toks)
    for language in languages:
        lexicon = index.lexicons[language]
        clauses = clause_tokens(toks, lexicon)
        conditional = bool(clauses) and lexicon.opens("conditions", clauses[0])
        # "…already refunded, or do you still see nothing?": a question of alternatives asks every clause.
        alternative = sentence.asks and lexicon.lists["alternatives"].within(toks)
        for number, tokens_ in enumerate(clauses):
            if number == 1 and conditional:
                continue  # the consequence of a leading condition states no fact: "If you cancel, you're refunded"
            clause = _Clause(tokens_, index)
            last = number == len(clauses) - 1 or alternative
            position = 0
            while position < len(tokens_):
                token = tokens_[position]
                matched_to = position + 1
                if not position % 64 and time.monotonic() > deadline:
                    raise TimeoutError("the truthfulness check ran out of time")
                for form in index.starting(tokens_, position, language) if token != SOFT else ():
                    end = _match(tokens_, position, form)
                    if end is None or not _done_here(lexicon, form, clause, position, end, asks=sentence.asks,
                                                     last=last):  # fmt: skip
                        continue
                    concept = _concept(form.concept, clause, position)
                    if concept in ("followup", "handoff") and conditional:
                        continue  # "If you email us, our team will get back to you" describes; it promises nothing
                    if concept is not None and concept not in found:
                        found.append(concept)
                    matched_to = max(matched_to, end)
                position = matched_to
    return found


def _concept(concept: str, clause: _Clause, position: int) -> str | None:
    """The concept as the clause part around the form names it: an action on a ticket is a ticket, sending to the
    team a handoff; the team's follow-up only when the clause names the team."""
    part = clause.part_start[position]
    if concept == "followup":
        return concept if clause.names(clause.index.team_words, -1) else None
    if concept not in _NOT_TICKET_CONCEPTS and clause.names(clause.index.ticket_words, part):
        return "ticket"
    if concept == "send" and clause.names(clause.index.team_words, part):
        return "followup"  # sent to a team: true once a handoff or a ticket took it there
    return concept


def _backed(evidence: Evidence, concept: str, ground: Ground) -> bool:
    if concept == "handoff":
        return evidence.handed_off
    if concept == "ticket":
        return evidence.ticket_made
    if concept == "followup":
        return evidence.ticket_made or evidence.handed_off
    if concept == "confirm":
        return evidence.any_success
    if concept == "done":
        # A lookup completes nothing: "Done!" needs an action or a handoff that succeeded.
        return evidence.acted and evidence.last_failed is None
    if concept in ground.relayed(evidence):
        return True
    named = evidence.backs is None or concept in evidence.backs
    return evidence.action_succeeded and named and evidence.last_failed is None


# --- references and figures ------------------------------------------------------------------------------------


_ATTACHED = frozenset("وفبل")  # Arabic letters written onto the next word: و٦٠ is "and 60"


def _core(word: str) -> str:
    core = word.strip(_EDGE)
    if len(core) > 1 and core[0] in _ATTACHED and core[1].isascii() and core[1].isalnum():
        core = core[1:]
    cut = core.find("'")
    if cut > 0 and core[cut - 1].isdigit():
        core = core[:cut]  # Turkish writes a suffix onto a number: 2'sinin, CS-80231'i
    return core.rstrip("%") if core.endswith("%") else core


def _numbers(sentence: Sentence, index: Index, ground: Ground) -> list[Claim]:
    claims: list[Claim] = []
    keys = [key(word.strip(_EDGE)) for word in sentence.words]
    skip = -1
    for position, word in enumerate(sentence.words):
        if position <= skip:
            continue
        if not position % 64 and time.monotonic() > ground.deadline:
            raise TimeoutError("the truthfulness check ran out of time")
        core = _core(word)
        if not core or figures.is_link(core):
            continue
        before = keys[max(0, position - 2) : position]
        if figures.has_digit(core):
            if before and before[-1] in index.structural:
                continue
            unit_after = position + 1 < len(keys) and keys[position + 1] in index.units
            ticket = core.upper().startswith("TKT") or any(
                index.ticket_words.has(b) for b in keys[max(0, position - 4) : position]
            )
            named = any(b in index.reference_words for b in before) and not unit_after and figures.plain(core)
            if figures.looks_like_code(core) or named or (ticket and figures.plain(core)):
                if not ground.holds(_reference_grounded, core, ticket):
                    claims.append(Claim.of(UNGROUNDED_REFERENCE, f"ticket {core.lstrip('#')}" if ticket else core))
                continue
            if sentence.asks:
                continue
            if position + 1 < len(sentence.words):
                joined = figures.grouped_with(core, _core(sentence.words[position + 1]))
                if joined is not None and ground.holds(_figure_grounded, joined, 1):
                    skip = position + 1
                    continue
            multiplier = index.multipliers.get(keys[position + 1], 1) if position + 1 < len(keys) else 1
            if figures.literals(core) and not ground.holds(_figure_grounded, core, multiplier):
                unit = sentence.words[position + 1].strip(_EDGE) if unit_after else ""
                claims.append(Claim.of(UNGROUNDED_FIGURE, f"{core} {unit}" if unit else core))
        elif not sentence.asks and (value := _spelled(keys, position, index)) is not None:
            if not ground.holds(_value_grounded, value):
                claims.append(Claim.of(UNGROUNDED_FIGURE, " ".join(sentence.words[position : position + 3])))
    return claims


def _spelled(keys: list[str], position: int, index: Index) -> str | None:
    """A figure written in words that starts at `position`, in the words of one language: number words (and
    multipliers: "dört yüz", "dua puluh", "two hundred"), then a unit of the same language within two words ("thirty
    days", "drei offene Bestellungen"), or a number word that is its own unit (Arabic's dual, "يومين"). None when
    the words there are no such figure (French "onze" is eleven, Dutch "onze" is "our")."""
    word = keys[position]
    if not any(head in index.number_words for head in index.heads(word)) and not (
        "-" in word and word.split("-", 1)[0] in index.number_words
    ):
        return None
    for lexicon in index.lexicons.values():
        if _word_value(word, lexicon) is None and word not in lexicon.multipliers:
            continue
        if position > 0 and (
            _word_value(keys[position - 1], lexicon) is not None or keys[position - 1] in lexicon.multipliers
        ):
            return None  # inside a figure read from its first word
        units = lexicon.lists["units"]
        total, end = 0, position
        current: int | None = None
        while end < len(keys):
            value = _word_value(keys[end], lexicon)
            multiplier = lexicon.multipliers.get(keys[end])
            if multiplier is not None and (current is not None or end == position):
                total += (current or 1) * multiplier
                current = None
            elif value is not None:
                current = (current or 0) + value
            else:
                break
            end += 1
        if end > position and (units.has(keys[end - 1]) or any(units.has(keys[at]) for at in range(end, end + 2)
                                                               if at < len(keys))):  # fmt: skip
            return str(total + (current or 0))
    return None


def _word_value(word: str, lexicon: Lexicon) -> int | None:
    """A number word's value in one language (an attached prefix read off: Arabic's وعشرين), a hyphenated one
    summed ("twenty-five")."""
    if word in lexicon.numbers:
        return lexicon.numbers[word]
    for prefix in lexicon.lists["prefixes"].singles:
        if word.startswith(prefix) and word[len(prefix) :] in lexicon.numbers:
            return lexicon.numbers[word[len(prefix) :]]
    if "-" in word:
        parts = word.split("-")
        if all(part in lexicon.numbers for part in parts):
            return sum(lexicon.numbers[part] for part in parts)
    return None


def _value_grounded(evidence: Evidence, value: str) -> bool:
    return value in evidence.values


def _reference_grounded(evidence: Evidence, core: str, ticket: bool) -> bool:
    code = figures.code(core)
    if ticket:
        digits = figures.code("".join(char for char in core if char.isdigit()))
        return (
            code in evidence.ticket_codes
            or code in evidence.tickets
            or (bool(digits) and (digits in evidence.ticket_codes or f"TKT{digits}" in evidence.tickets))
        )
    return code in evidence.codes


def _figure_grounded(evidence: Evidence, core: str, multiplier: int) -> bool:
    """Every number of the word is a value of the sources: as a whole (any reading), or its separated parts
    (`12.03.2024` a date, `10.30` a time); with a multiplier after it ("50 ribu"), the product too."""
    for literal in figures.literals(core):
        values = figures.readings(literal)
        if values == {"0"} and literal != core:
            continue
        if not values.isdisjoint(evidence.values):
            continue
        if multiplier > 1 and any(figures.times(value, multiplier) in evidence.values for value in values):
            continue
        parts = figures.parts(literal)
        if len(parts) > 1 and all(part in evidence.values for part in parts if part != "0"):
            continue
        return False
    return True


# --- one sentence ----------------------------------------------------------------------------------------------


def sentence_claims(sentence: Sentence, ground: Ground, index: Index = INDEX) -> list[Claim]:
    """Every claim of one sentence (see the module docstring), in both its readings when it has two."""
    claims = _claims(sentence, ground, index)
    if sentence.split is not None:
        alternate = sentence._replace(words=sentence.split, split=None)
        claims += [claim for claim in _claims(alternate, ground, index) if claim not in claims]
    return claims


def _claims(sentence: Sentence, ground: Ground, index: Index) -> list[Claim]:
    claims = _numbers(sentence, index, ground)
    for concept in _actions(sentence, index, ground.deadline):
        if not ground.holds(_backed, concept, ground):
            failed = ground.last_failed()
            claims.append(Claim.of(UNBACKED_ACTION, sentence.text, _TEXT_MAX, failed if concept in _AFTER else ""))
            break
    return claims
