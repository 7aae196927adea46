"""What the conversation holds: the sources a fact of an answer must come from, and the calls that back an action.

SPEC §5: a reference-like token or a figure stated as a fact must appear in a source of the conversation — a tool
result, a knowledge passage retrieved in it, the agent's instructions or the customer's own messages — and a
statement that an action was carried out needs a call of a matching effect that succeeded in the segment.

`Facts` is what the engine knows (cheap to build: texts and calls it holds already); the lookups that cost a query
(the segment's earlier calls, the customer's tickets, whether the team holds the conversation) are callables, asked
only when an answer names something they could back. `Evidence` is what the guard reads out of them, once.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from guard import figures
from guard.lexicon import GENERIC_CONCEPTS, INDEX, TOOL_WORDS, Index, tool_concepts
from guard.reading import words_of


@dataclasses.dataclass(frozen=True)
class Call:
    """A tool call of the conversation as the guard reads it."""

    name: str
    effect: str  # read | action | escalation
    succeeded: bool
    result: Any = None  # what the model was shown
    receipt: str | None = None  # ticket | handoff: a built-in that made one
    builtin: bool = False
    knowledge: bool = False  # search_knowledge: passages are sources of figures, never of actions done
    refused_as_duplicate: bool = False  # refused because the same call already succeeded: not a failure


def _none() -> Sequence[Call]:
    return ()


def _no_tickets() -> frozenset[str]:
    return frozenset()


def _no() -> bool:
    return False


@dataclasses.dataclass(frozen=True)
class Facts:
    """The conversation an answer is checked against."""

    instructions: Sequence[str] = ()  # the agent's instructions, variables, tool descriptions and grant rules
    customer: Sequence[str] = ()  # the customer's messages
    others: Sequence[str] = ()  # the team's messages, the agent's earlier answers that passed
    knowledge: Sequence[str] = ()  # passages retrieved in the conversation other than through a call
    calls: Sequence[Call] = ()  # this run's, in order
    earlier_calls: Callable[[], Sequence[Call]] = _none  # the segment's earlier runs' (a query)
    ticket_numbers: Callable[[], frozenset[str]] = _no_tickets  # "TKT-3": this customer's tickets (the desk)
    handed_off: Callable[[], bool] = _no  # the team holds the conversation


def _leaves(value: Any, under_ticket: bool = False) -> Iterator[tuple[Any, bool, int | None]]:
    """Every text or number of a tool result, with whether a ticket-like key holds it; each list's length too; a
    key whose value is true, as its words ("link_sent": true says "link sent")."""
    pending: list[tuple[Any, bool]] = [(value, under_ticket)]
    while pending:
        node, ticket = pending.pop()
        if isinstance(node, dict):
            pending.extend((item, ticket or _ticket_key(key)) for key, item in node.items())
            yield from ((str(key), False, None) for key, item in node.items() if item is True)
        elif isinstance(node, list):
            yield None, ticket, len(node)
            pending.extend((item, ticket) for item in node)
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, (str, int, float)):
            yield node, ticket, None


_TICKET_KEYS = ("ticket", "case", "incident", "complaint", "reference", "تذكر", "number")


def _ticket_key(key: object) -> bool:
    words = str(key).lower()
    return any(word in words for word in _TICKET_KEYS) or words in ("ref", "ref_no", "id")


class Evidence:
    """What the sources hold, read the way an answer is read. Built in two steps: this run's facts, then (only
    when an answer names something those don't back) the segment's earlier calls too."""

    def __init__(self, facts: Facts, index: Index = INDEX, *, with_earlier: bool = False) -> None:
        self.facts = facts
        self.index = index
        self.with_earlier = with_earlier
        calls = list(facts.earlier_calls()) + list(facts.calls) if with_earlier else list(facts.calls)
        self.calls = calls
        self.values: set[str] = set()  # every figure's readings
        self.codes: set[str] = set()  # every word holding a digit, as a code, and every digit run
        self.ticket_codes: set[str] = set()  # codes a ticket source gives (and the customer's own)
        self.results: list[str] = []  # each text of a result (not a passage's), which may report an action done
        texts = [*facts.instructions, *facts.others, *facts.knowledge]
        self._read_words(words_of(texts))
        self._read_words(words_of(facts.customer), ticket=True)
        for call in calls:
            if call.result is None:
                continue
            for leaf, ticket, length in _leaves(call.result, call.receipt == "ticket"):
                if length is not None:
                    self.values.add(str(length))
                    continue
                if isinstance(leaf, (int, float)):
                    self._read_words([str(leaf)], ticket=ticket)
                    continue
                words = list(words_of([leaf]))
                self._read_words(words, ticket=ticket)
                if not call.knowledge and isinstance(leaf, str):
                    self.results.append(leaf.replace("_", " "))
        self.any_success = any(call.succeeded for call in calls)
        self.acted = any(call.succeeded and call.effect in ("action", "escalation") for call in calls)
        self.action_succeeded = any(call.succeeded and call.effect == "action" and not call.receipt for call in calls)
        # The action concepts the succeeded action calls back, by their names (guard/tools.toml); None: every one.
        self.backs: frozenset[str] | None = frozenset(GENERIC_CONCEPTS)
        for call in calls:
            if call.succeeded and call.effect == "action" and not call.receipt:
                named = tool_concepts(call.name, TOOL_WORDS)
                self.backs = None if named is None or self.backs is None else self.backs | named
        self.ticket_made = any(
            call.succeeded and (call.receipt == "ticket" or (call.effect == "action" and not call.builtin))
            for call in calls
        )
        # A handoff built-in, or one of the business's own tools whose effect is to escalate (escalate_to_billing).
        self.handoff = any(
            call.succeeded and (call.receipt == "handoff" or (call.effect == "escalation" and not call.builtin))
            for call in calls
        )
        self.last_failed: str | None = None
        for call in calls:
            if call.succeeded:
                self.last_failed = None
            elif not call.refused_as_duplicate:
                self.last_failed = call.name

    def _read_words(self, words: Iterable[str], *, ticket: bool = False) -> None:
        previous: int | None = None  # the number just read (digits or words), for a multiplier after it
        for word in words:
            lowered = word.casefold().strip(".,;:!?()")
            value = self.index.numbers.get(lowered)
            multiplier = self.index.multipliers.get(lowered)
            if multiplier is not None and previous is not None:
                self.values.add(str(previous * multiplier))
            if value is not None:
                self.values.add(str(value))
            for part in lowered.split("-") if "-" in lowered else ():
                if part in self.index.numbers:
                    self.values.add(str(self.index.numbers[part]))
            number: int | None = value if multiplier is None else None
            if figures.has_digit(word):
                for group in figures.groups(word):
                    self.values.update(group)
                for literal in figures.literals(word):
                    self.values.update(figures.parts(literal))
                self.values.update(figures.twelve_hour(word))
                found = figures.code(word.strip(".,;:!?()[]\"'"))
                self.codes.add(found)
                runs = [figures.canonical(literal) for literal in _digit_runs(word)]
                self.codes.update(runs)
                if ticket:
                    self.ticket_codes.add(found)
                    self.ticket_codes.update(runs)
                literals = figures.literals(word)
                number = int(literals[-1].replace(",", "").split(".")[0] or 0) if len(literals) == 1 else None
            previous = number

    @functools.cached_property
    def tickets(self) -> frozenset[str]:
        """Codes of the customer's tickets (the desk's `TKT-<n>`)."""
        return frozenset(figures.code(number) for number in self.facts.ticket_numbers())

    @functools.cached_property
    def handed_off(self) -> bool:
        return self.handoff or self.facts.handed_off()


def _digit_runs(word: str) -> Iterator[str]:
    run: list[str] = []
    for char in word:
        if char.isdigit() and char.isascii():
            run.append(char)
        elif run:
            yield "".join(run)
            run = []
    if run:
        yield "".join(run)
