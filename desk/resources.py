"""How the desk's tickets and handoffs look in the API (rendered and in the OpenAPI document). Their webhook events
(`ticket.*`, `handoff.*`) carry the same renderings."""

from __future__ import annotations

from desk.models import Handoff, Ticket
from kagent.rendering import Const, Field, Resource, Timestamp

_ID = {"type": "string"}
_NULLABLE_ID = {"type": ["string", "null"]}


TICKET: Resource[Ticket] = Resource(
    "Ticket",
    {
        "id": Field(_ID, "pk"),
        "object": Const("ticket"),
        "number": Field({"type": "string", "example": "TKT-12"}, "display_number"),
        "title": Field({"type": "string"}, "title"),
        "description": Field({"type": "string"}, "description"),
        "priority": Field({"enum": ["low", "normal", "high", "urgent"]}, "priority"),
        "resolution_attempted": Field({"type": "string"}, "resolution_attempted"),
        "status": Field({"enum": ["open", "closed"]}, "status"),
        "closed_at": Timestamp("closed_at", nullable=True),
        "end_user": Field(
            {**_NULLABLE_ID, "description": "the end user's external id"},
            lambda ticket: ticket.end_user.external_id if ticket.end_user else None,
        ),
        "session": Field(_NULLABLE_ID, "session_id"),
        "is_test": Field({"type": "boolean", "description": "made in the test panel"}, "is_test"),
        "created_at": Timestamp("created_at"),
    },
)

HANDOFF: Resource[Handoff] = Resource(
    "Handoff",
    {
        "id": Field(_ID, "pk"),
        "object": Const("handoff"),
        "session": Field(_NULLABLE_ID, "session_id"),
        "end_user": Field(
            {**_NULLABLE_ID, "description": "the end user's external id"},
            lambda handoff: handoff.end_user.external_id if handoff.end_user else None,
        ),
        "reason_type": Field({"type": "string"}, "reason_type"),
        "summary": Field({"type": "string"}, "summary"),
        "status": Field({"enum": ["open", "closed"]}, "status"),
        "assignee": Field(
            {"type": ["string", "null"], "description": "who on the team has it (a name or an email)"},
            lambda handoff: handoff.assignee or None,
        ),
        "closed_at": Timestamp("closed_at", nullable=True),
        "is_test": Field({"type": "boolean", "description": "made in the test panel"}, "is_test"),
        "created_at": Timestamp("created_at"),
    },
)
