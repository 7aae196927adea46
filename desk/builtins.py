"""The desk's built-ins, run by the engine when the policy check allows a call: `transfer_to_human` hands the
conversation to the team (a handoff), `create_ticket` opens a ticket for a follow-up. Each is bound to its definition
in the registry (tools/builtins.py, which says why) when the app is ready (desk/apps.py), makes its object through
the desk's services (once per tool call: a retry after a crash finds it), and returns exactly what the model is
shown: the object's receipt (`handoff`, `ticket`: what the chat widget shows the customer and the truthfulness guard
accepts) and what to tell the customer.
"""

from __future__ import annotations

from typing import Any

from desk import services
from runs.models import Run, ToolCall
from tools.builtins import CREATE_TICKET, TRANSFER_TO_HUMAN, executes


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
