"""Conversations for the guard's tests: `facts(...)` builds what a run holds in a line."""

from __future__ import annotations

from typing import Any

from guard import Call, Facts


def call(name: str, effect: str = "action", ok: bool = True, result: Any = None, **more: Any) -> Call:
    receipt = {"create_ticket": "ticket", "transfer_to_human": "handoff"}.get(name)
    return Call(
        name=name,
        effect=effect,
        succeeded=ok,
        result=result if result is not None else {"ok": ok},
        receipt=receipt,
        builtin=receipt is not None or name == "search_knowledge",
        knowledge=name == "search_knowledge",
        **more,
    )


def facts(
    *calls: Call,
    instructions: str = "",
    customer: tuple[str, ...] = (),
    tickets: frozenset[str] = frozenset(),
    handed_off: bool = False,
    earlier: tuple[Call, ...] = (),
) -> Facts:
    return Facts(
        instructions=(instructions,) if instructions else (),
        customer=customer,
        calls=calls,
        earlier_calls=lambda: earlier,
        ticket_numbers=lambda: tickets,
        handed_off=lambda: handed_off,
    )


def kinds(claims: list[Any]) -> set[str]:
    return {claim.kind for claim in claims}
