"""The policy check as a pure function (seed, "The policy check"; SPEC §5's table): the steps in the table's
order, each built-in's own declarations, and the lazy lookups. The refusals as a run sees them, through the engine,
are in tests/runs/test_policy_refusals.py."""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

import pytest
from django.utils import timezone

from tools import builtins
from tools.policy import POLICY_STEPS, PolicyContext, arguments_hash, policy_check
from tools.toolset import ToolSetFacts, ToolSpec, tool_set_build


def test_verified_user_required_for_a_client_tool_flagged_so():
    # The only tools that need a verified user are HTTP tools (tests/runs/test_http_tools.py covers those too).
    spec = {
        "name": "order_status",
        "kind": "http",
        "effect": "read",
        "requires_verified_user": True,
        "parameters": {"type": "object", "properties": {"n": {"type": "string"}}, "additionalProperties": False},
        "description": "x",
    }
    ctx = PolicyContext(
        tools_enabled=True,
        tool_set=(ToolSpec.from_dict(spec),),
        verified=False,
        has_session=True,
        actions_paused=lambda: False,
        business_hours=None,
        now=timezone.now(),
        round=1,
        max_rounds=3,
        index_in_round=0,
        cancelled=False,
        succeeded=frozenset(),
    )
    decision = policy_check(ctx, "order_status", '{"n": "8812"}')
    assert (decision.allowed, decision.code) == (False, "verified_user_required")
    assert "sign in" in decision.guidance


def test_a_catastrophic_tenant_pattern_cannot_hold_the_worker():
    spec = {
        "name": "lookup",
        "kind": "client",
        "effect": "read",
        "requires_verified_user": False,
        "description": "x",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}},
            "additionalProperties": False,
        },
    }
    ctx = PolicyContext(
        tools_enabled=True,
        tool_set=(ToolSpec.from_dict(spec),),
        verified=False,
        has_session=True,
        actions_paused=lambda: False,
        business_hours=None,
        now=timezone.now(),
        round=1,
        max_rounds=3,
        index_in_round=0,
        cancelled=False,
        succeeded=frozenset(),
    )
    started = time.monotonic()
    decision = policy_check(ctx, "lookup", json.dumps({"code": "a" * 40 + "!"}))
    assert time.monotonic() - started < 2
    assert decision.code == "invalid_arguments"
    assert policy_check(ctx, "lookup", json.dumps({"code": "aaa"})).allowed


# --- the steps, in the SPEC's order ----------------------------------------------------------------------------

REFUND: dict[str, Any] = {
    "name": "refund",
    "description": "Refund an order.",
    "effect": "action",
    "requires_verified_user": True,
    "config": {
        "method": "POST",
        "url": "https://api.example.com/refunds",
        "parameters": {
            "type": "object",
            "properties": {"order": {"type": "string"}},
            "required": ["order"],
            "additionalProperties": False,
        },
    },
}
GOOD = json.dumps({"order": "8812"})
NOW = datetime.datetime(2030, 1, 1, 12, 0, tzinfo=datetime.UTC)
CLOSED_TODAY = {"timezone": "UTC", "closed_dates": ["2030-01-01"]}


def tool_set() -> tuple[ToolSpec, ...]:
    config = {
        "tools": {
            "builtin": {name: {"enabled": True} for name in builtins.BUILTIN_NAMES},
            "http": [{"tool": "refund"}],
            "client": [{"name": "get_cart", "description": "The cart.", "effect": "read"}],
        }
    }
    facts = ToolSetFacts(
        one_shot=False,
        allow_actions=True,
        verified=True,
        actions_paused=False,
        store=True,
        has_searchable_knowledge=True,
    )
    return tool_set_build(config=config, http_tools={"refund": REFUND}, facts=facts)


class Lookups:
    """The context's lazy lookups, recording which ones a check asked for."""

    def __init__(self, **values: Any) -> None:
        self.values = {
            "actions_paused": False,
            "open_ticket_number": None,
            "has_searchable_knowledge": True,
            "http_calls_last_hour": 0,
            "tickets_last_day": 0,
            **values,
        }
        self.asked: list[str] = []

    def __getitem__(self, name: str) -> Any:
        def lookup() -> Any:
            self.asked.append(name)
            return self.values[name]

        return lookup


def context(lookups: Lookups | None = None, **facts: Any) -> PolicyContext:
    lookups = lookups or Lookups()
    fields: dict[str, Any] = {
        "tools_enabled": True,
        "tool_set": tool_set(),
        "verified": True,
        "has_session": True,
        "business_hours": None,
        "now": NOW,
        "round": 1,
        "max_rounds": 3,
        "index_in_round": 0,
        "cancelled": False,
        "succeeded": frozenset(),
        **facts,
    }
    return PolicyContext(**fields, **{name: lookups[name] for name in lookups.values})


def test_the_steps_are_the_rows_of_the_spec_table_in_order() -> None:
    assert [step.__name__ for step in POLICY_STEPS] == [
        "in_the_tool_set",
        "arguments_valid",
        "verified_user",
        "available_now",
        "not_a_duplicate",
        "not_cancelled",
        "within_per_user_limits",
        "within_round_budget",
    ]


# One way to fail each row for the HTTP action tool `refund`, as (context facts, lookups, arguments).
FAILURES: list[tuple[str, dict[str, Any], dict[str, Any], str | None]] = [
    ("tool_not_available", {"tools_enabled": False}, {}, None),
    ("invalid_arguments", {}, {}, json.dumps({"order": "8812", "extra": 1})),
    ("verified_user_required", {"verified": False}, {}, None),
    ("not_available", {}, {"actions_paused": True}, None),
    ("duplicate_call", {"succeeded": frozenset({("refund", arguments_hash({"order": "8812"}))})}, {}, None),
    ("run_cancelled", {"cancelled": True}, {}, None),
    ("rate_limited", {}, {"http_calls_last_hour": 20}, None),
    ("round_budget_exhausted", {"round": 4}, {}, None),
]


@pytest.mark.parametrize("first", range(len(FAILURES)), ids=[code for code, *_ in FAILURES])
def test_a_call_failing_several_rows_gets_the_earliest_code(first: int) -> None:
    facts: dict[str, Any] = {}
    values: dict[str, Any] = {}
    arguments = GOOD
    for _, row_facts, row_values, row_arguments in FAILURES[first:]:
        facts.update(row_facts)
        values.update(row_values)
        arguments = row_arguments or arguments
    decision = policy_check(context(Lookups(**values), **facts), "refund", arguments)
    assert (decision.allowed, decision.code) == (False, FAILURES[first][0])


def test_a_call_failing_nothing_is_allowed_with_its_spec() -> None:
    decision = policy_check(context(), "refund", GOOD)
    assert decision.allowed and decision.code == ""
    assert decision.spec is not None and decision.spec.definition == REFUND


def test_the_last_row_also_caps_calls_per_round() -> None:
    assert policy_check(context(index_in_round=4), "refund", GOOD).allowed
    assert policy_check(context(index_in_round=5), "refund", GOOD).code == "too_many_calls"


# --- what each built-in declares ------------------------------------------------------------------------------


def test_each_builtin_declares_what_it_needs() -> None:
    table = {
        tool.name: (tool.follows_business_hours, tool.one_open_ticket_per_customer, tool.tickets_per_day)
        for tool in builtins.all_builtins()
    }
    assert table == {
        "create_ticket": (False, True, 5),
        "flag_conversation": (False, False, None),
        "search_knowledge": (False, False, None),
        "transfer_to_human": (True, False, None),
    }


SAMPLES: dict[str, dict[str, Any]] = {
    "create_ticket": {"title": "t", "description": "d"},
    "flag_conversation": {"reason": "r"},
    "search_knowledge": {"query": "q"},
    "transfer_to_human": {"reason_type": "complaint", "summary": "s"},
}


@pytest.mark.parametrize(
    ("name", "facts", "values", "code"),
    [
        ("flag_conversation", {"has_session": False}, {}, "not_available"),
        ("search_knowledge", {}, {"has_searchable_knowledge": False}, "not_available"),
        ("transfer_to_human", {"business_hours": CLOSED_TODAY}, {}, "outside_business_hours"),
        ("create_ticket", {}, {"open_ticket_number": "TKT-7"}, "ticket_already_open"),
        ("create_ticket", {}, {"tickets_last_day": 5}, "rate_limited"),
    ],
)
def test_a_builtin_is_refused_by_its_own_declaration(
    name: str, facts: dict[str, Any], values: dict[str, Any], code: str
) -> None:
    decision = policy_check(context(Lookups(**values), **facts), name, json.dumps(SAMPLES[name]))
    assert (decision.allowed, decision.code) == (False, code)
    # The other built-ins don't declare it, so the same facts let them through.
    for other, sample in SAMPLES.items():
        if other != name:
            assert policy_check(context(Lookups(**values), **facts), other, json.dumps(sample)).allowed, other


def test_the_open_ticket_guidance_carries_the_existing_number() -> None:
    ctx = context(Lookups(open_ticket_number="TKT-7"))
    decision = policy_check(ctx, "create_ticket", json.dumps(SAMPLES["create_ticket"]))
    assert "TKT-7" in decision.guidance


# --- lazy lookups -----------------------------------------------------------------------------------------------


def test_only_the_checks_reached_cost_a_lookup() -> None:
    lookups = Lookups()
    assert policy_check(context(lookups, tools_enabled=False), "create_ticket", "{}").code == "tool_not_available"
    assert lookups.asked == []
    assert policy_check(context(lookups), "transfer_to_human", json.dumps(SAMPLES["transfer_to_human"])).allowed
    assert lookups.asked == []  # an escalation with no limits asks nothing
    assert policy_check(context(lookups), "create_ticket", json.dumps(SAMPLES["create_ticket"])).allowed
    assert lookups.asked == ["actions_paused", "open_ticket_number", "tickets_last_day"]


@pytest.mark.parametrize(
    "raw",
    [
        '{"order": "88\\ud80012"}',  # a lone surrogate: valid JSON that UTF-8 can't hold
        '{"order": "8812", "\\udc00": 1}',  # ... as a key
        '{"order": ' + "[" * 5000 + "]" * 5000 + "}",  # too deep for the parser
        '{"order": ' + "[" * 100 + "]" * 100 + "}",  # parsed, but deeper than any tool's arguments go
    ],
)
def test_arguments_that_cannot_be_read_safely_are_refused_not_raised(raw: str) -> None:
    decision = policy_check(context(), "refund", raw)
    assert (decision.allowed, decision.code) == (False, "invalid_arguments")
