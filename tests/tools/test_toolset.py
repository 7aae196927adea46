"""A run's tool set: typed `ToolSpec`s in the code, the same JSON as always in `Segment.tool_set`/`Run.tool_set`."""

from __future__ import annotations

import json
from typing import Any

from tests.examples import SEED_ORDER_STATUS
from tools.builtin_tool import Effect
from tools.toolset import ToolKind, ToolSetFacts, ToolSpec, tool_set_build, tool_set_from_json, tool_set_json

FACTS = ToolSetFacts(
    one_shot=False, allow_actions=False, verified=True, actions_paused=False, store=True, has_searchable_knowledge=True
)
CONFIG: dict[str, Any] = {
    "tools": {
        "builtin": {"create_ticket": {"enabled": True, "rules": "Only for delivery complaints."}},
        "http": [{"tool": "order_status", "rules": "Look up before answering."}],
        "client": [{"name": "get_cart", "description": "The cart.", "effect": "read"}],
    }
}


def build() -> tuple[ToolSpec, ...]:
    return tool_set_build(config=CONFIG, http_tools={"order_status": SEED_ORDER_STATUS}, facts=FACTS)


def test_each_kind_is_stored_with_its_keys_in_order() -> None:
    stored = {item["name"]: item for item in tool_set_json(build())}
    assert list(stored) == ["create_ticket", "get_cart", "order_status", "search_knowledge", "transfer_to_human"]
    assert list(stored["create_ticket"]) == [
        "name",
        "kind",
        "effect",
        "version",
        "description",
        "parameters",
        "requires_verified_user",
    ]
    assert list(stored["order_status"]) == [
        "name",
        "kind",
        "effect",
        "description",
        "parameters",
        "requires_verified_user",
        "definition",
    ]
    assert list(stored["get_cart"]) == ["name", "kind", "effect", "description", "parameters", "requires_verified_user"]
    assert stored["order_status"]["definition"] == SEED_ORDER_STATUS
    assert stored["order_status"]["requires_verified_user"] is True
    # Plain JSON strings, not enum members, so a stored tool set compares and serializes as it always did.
    assert {type(item[key]) for item in stored.values() for key in ("kind", "effect")} == {str}


def test_stored_json_reads_back_to_the_same_specs_and_the_same_json() -> None:
    specs = build()
    stored = json.loads(json.dumps(tool_set_json(specs)))  # through the JSON column
    assert tool_set_from_json(stored) == specs
    assert tool_set_json(tool_set_from_json(stored)) == stored


def test_a_spec_says_what_it_is() -> None:
    by_name = {spec.name: spec for spec in build()}
    ticket, order, cart = by_name["create_ticket"], by_name["order_status"], by_name["get_cart"]
    assert (ticket.kind, ticket.effect, ticket.version, ticket.definition) == (
        ToolKind.BUILTIN,
        Effect.ACTION,
        "1.0.0",
        None,
    )
    assert ticket.builtin is not None and ticket.builtin.tickets_per_day == 5
    assert ticket.description.endswith("This company's rules for this action\nOnly for delivery complaints.")
    assert (order.kind, order.effect, order.builtin) == (ToolKind.HTTP, Effect.READ, None)
    assert (cart.kind, cart.version, cart.definition, cart.builtin) == (ToolKind.CLIENT, None, None, None)
