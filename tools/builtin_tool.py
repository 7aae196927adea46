"""What a built-in tool is: a `BuiltinTool` entry, its `Effect`, the `Receipt` of what it makes, its starter rules
and the argument names other models use for its parameters.

The entries themselves are in tools/builtin_defs.py; the registry that lists them, binds their executors and locks
their model-facing text is tools/builtins.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final


class Effect(StrEnum):
    READ = "read"
    ESCALATION = "escalation"
    ACTION = "action"


class Receipt(StrEnum):
    """What a built-in's successful call really made, named in its result under this key (`{"ok": true, "ticket":
    {"number": "TKT-3", …}}`). The truthfulness guard takes a reply's claim of a ticket or a handoff as true only
    after such a call (runs/engine/state.py `_facts`); the chat widget shows the customer its `fields`
    (runs/run_events.py)."""

    HANDOFF = "handoff"
    TICKET = "ticket"

    @property
    def fields(self) -> tuple[str, ...]:
        """What the customer is shown of it: never the model's claim, the object the call made."""
        return _RECEIPT_FIELDS[self]


_RECEIPT_FIELDS: Final[Mapping[Receipt, tuple[str, ...]]] = MappingProxyType(
    {Receipt.HANDOFF: ("id", "status"), Receipt.TICKET: ("number", "status")}
)


@dataclass(frozen=True)
class StarterRule:
    """A rule the dashboard suggests for a grant's `rules`, and why a business would want it."""

    rule: str
    reasoning: str


@dataclass(frozen=True)
class ArgumentSynonym:
    """An argument name other models use for one of the tool's parameters.

    `only_enum_values`: the name is ambiguous between parameters, so it maps only when its value is one of the
    target's enum values (e.g. `reason: "complaint"` is a reason_type; `reason: "parcel is late"` is not).
    """

    name: str
    target: str
    only_enum_values: bool = False


@dataclass(frozen=True)
class BuiltinTool:
    name: str
    version: str
    effect: Effect
    default_enabled: bool
    description: str
    # Canonical JSON of the parameter schema: a string keeps the registry immutable; `parameters` hands out copies.
    parameters_json: str
    starter_rules: tuple[StarterRule, ...]
    aliases: tuple[str, ...] = ()
    argument_synonyms: tuple[ArgumentSynonym, ...] = ()
    # What the tool needs to be offered and to run (SPEC §5, the policy check's rows 4 and 7). None of it is shown
    # to the model, so none of it is in the version lock.
    # Seed: flag_conversation is for sessions only (a one-shot run has nothing to flag).
    sessions_only: bool = False
    # Seed: search_knowledge is offered only when the agent has searchable sources.
    requires_searchable_knowledge: bool = False
    # Seed: transfer_to_human needs the team in business hours (outside them, nobody can take the conversation).
    follows_business_hours: bool = False
    # Seed: create_ticket refuses when the customer already has an open ticket, and gives the existing number.
    one_open_ticket_per_customer: bool = False
    # Seed: create_ticket, 5 a day per end user (per session if anonymous).
    tickets_per_day: int | None = None
    # What a successful call makes, as its result names it (see `Receipt`); None: nothing the guard checks.
    receipt: Receipt | None = None
    # What a test-panel run's real call of it leaves for the team, marked as a test (the panel says so by the call).
    test_object: str | None = None

    @property
    def parameters(self) -> dict[str, Any]:
        """The strict JSON Schema (Draft 2020-12) of the arguments; a fresh copy each call."""
        schema: dict[str, Any] = json.loads(self.parameters_json)
        return schema

    @property
    def model_facing_text(self) -> str:
        """Everything the model is shown for this tool (without a grant's rules), canonically serialized."""
        return canonical_json({"name": self.name, "description": self.description, "parameters": self.parameters})

    @property
    def text_sha256(self) -> str:
        return hashlib.sha256(self.model_facing_text.encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
