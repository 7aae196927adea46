"""The desk's built-ins, run by the engine when the policy check allows a call: `transfer_to_human` hands the
conversation to the team (a handoff), `create_ticket` opens a ticket for a follow-up. Each is bound to its definition
in the registry (tools/builtins.py, which says why) when the app is ready (desk/apps.py), makes its object through
the desk's services (once per tool call: a retry after a crash finds it), and returns exactly what the model is
shown: the object's receipt (`handoff`, `ticket`: what the chat widget shows the customer and the truthfulness guard
accepts) and what to tell the customer. With them the desk binds its facts: what the engine asks of it (the
customer's tickets for the policy check and the truthfulness guard, whether a handoff is open) and the handoffs a
conversation handed back closes.
"""

from __future__ import annotations

from typing import Any

from desk import selectors, services
from runs.models import Run, ToolCall
from tools.builtin_defs import CREATE_TICKET, TRANSFER_TO_HUMAN
from tools.builtins import DeskFacts, bind_desk, executes


@executes(TRANSFER_TO_HUMAN)
def transfer_to_human(run: Run, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    handoff = services.handoff_create(
        run=run, tool_call_id=call.id, reason_type=args["reason_type"], summary=args["summary"]
    )
    return {
        "ok": True,
        "handoff": {"id": handoff.id, "status": handoff.status},
        "message": "The conversation is now in the team's queue. Tell the customer a person from the team will "
        "continue here; don't promise a time.",
    }


@executes(CREATE_TICKET)
def create_ticket(run: Run, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    ticket = services.ticket_create(
        run=run,
        tool_call_id=call.id,
        title=args["title"],
        description=args["description"],
        priority=args.get("priority", "normal"),
        resolution_attempted=args.get("resolution_attempted", ""),
    )
    return {
        "ok": True,
        "ticket": {"number": ticket.display_number, "status": ticket.status, "priority": ticket.priority},
        "message": f"Ticket {ticket.display_number} is open. Give the customer this number.",
    }


def _open_ticket_number(*, project_id: str, rate_key: str, is_test: bool) -> str | None:
    ticket = selectors.customer_open_ticket(project_id=project_id, rate_key=rate_key, is_test=is_test)
    return ticket.display_number if ticket else None


# What the engine and the conversation ask of the desk (tools/builtins.py `DeskFacts`).
bind_desk(
    DeskFacts(
        open_ticket_number=_open_ticket_number,
        tickets_since=selectors.customer_tickets_since,
        ticket_numbers=selectors.customer_ticket_numbers,
        handed_off=selectors.session_handed_off,
        close_handoffs=services.close_handoffs,
    )
)
