"""The desk over the API: `/v1/tickets…` and `/v1/handoffs…` (SPEC §4: close and reopen; test objects only with
`?include_tests=true`). Secret keys only. Each operation parses its body, calls one service or selector, renders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from desk import selectors, services
from desk.resources import HANDOFF, TICKET
from kagent.api import ProjectApi, paginate, param_bool
from kagent.errors import Unprocessable
from kagent.inputs import Input
from kagent.openapi import list_of

DESK_FILTERS = [
    OpenApiParameter("status", str, enum=["open", "closed"]),
    OpenApiParameter("include_tests", bool, description="include test-panel objects (off by default)"),
]


def _desk_filters(request: Request) -> dict[str, Any]:
    status_filter = request.query_params.get("status")
    if status_filter is not None and status_filter not in ("open", "closed"):
        raise Unprocessable("invalid_parameter", "status is open or closed.")
    # true or false, like every boolean parameter (the fuzzer found `include_tests=0.53` read as false)
    return {"status": status_filter, "include_tests": bool(param_bool(request.query_params, "include_tests"))}


class TicketListApi(ProjectApi):
    @extend_schema(operation_id="tickets_list", parameters=DESK_FILTERS, responses=list_of(TICKET.ref))
    def get(self, request: Request) -> Response:
        tickets = selectors.ticket_list(project=self.project, **_desk_filters(request))
        return Response(paginate(request, tickets, TICKET.render))


@dataclass(frozen=True)
class TicketUpdate:
    status: str
    priority: str


TICKET_UPDATE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "status": {"enum": ["open", "closed"], "x-message": "status is one of open, closed."},
            "priority": {
                "enum": ["low", "normal", "high", "urgent"],
                "x-message": "priority is one of low, normal, high, urgent.",
            },
        },
    },
    TicketUpdate,
)


class TicketDetailApi(ProjectApi):
    @extend_schema(operation_id="tickets_retrieve", responses={200: TICKET.ref})
    def get(self, request: Request, ticket_id: str) -> Response:
        return Response(TICKET.render(selectors.ticket_get(project=self.project, ticket_id=ticket_id)))

    @extend_schema(
        operation_id="tickets_update",
        request=TICKET_UPDATE.body,
        responses={200: TICKET.ref},
        description="Close or reopen a ticket, or change its priority. A ticket whose customer has another open "
        "ticket is not reopened (409 ticket_already_open): one open agent ticket per customer.",
    )
    def patch(self, request: Request, ticket_id: str) -> Response:
        ticket = selectors.ticket_get(project=self.project, ticket_id=ticket_id)
        body = TICKET_UPDATE.parse(request.data, partial=True)
        ticket = services.ticket_update(ticket=ticket, status=body.status, priority=body.priority)
        return Response(TICKET.render(ticket))


class HandoffListApi(ProjectApi):
    @extend_schema(operation_id="handoffs_list", parameters=DESK_FILTERS, responses=list_of(HANDOFF.ref))
    def get(self, request: Request) -> Response:
        handoffs = selectors.handoff_list(project=self.project, **_desk_filters(request))
        return Response(paginate(request, handoffs, HANDOFF.render))


@dataclass(frozen=True)
class HandoffUpdate:
    status: str
    assignee: str | None


HANDOFF_UPDATE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "status": {"enum": ["open", "closed"], "x-message": "status is one of open, closed."},
            "assignee": {
                "type": ["string", "null"],
                "maxLength": 200,
                "description": "who on the team has it: a name or an email (free text); null or empty clears it",
                "x-message": "assignee is a name or an email, at most 200 characters.",
            },
        },
    },
    HandoffUpdate,
)


class HandoffDetailApi(ProjectApi):
    @extend_schema(operation_id="handoffs_retrieve", responses={200: HANDOFF.ref})
    def get(self, request: Request, handoff_id: str) -> Response:
        return Response(HANDOFF.render(selectors.handoff_get(project=self.project, handoff_id=handoff_id)))

    @extend_schema(
        operation_id="handoffs_update",
        request=HANDOFF_UPDATE.body,
        responses={200: HANDOFF.ref},
        description="Close a handoff (its session is closed when none of its handoffs is open any more; a new "
        "message from the customer opens it again), reopen it, or say who on the team has it.",
    )
    def patch(self, request: Request, handoff_id: str) -> Response:
        handoff = selectors.handoff_get(project=self.project, handoff_id=handoff_id)
        body = HANDOFF_UPDATE.parse(request.data, partial=True)
        handoff = services.handoff_update(handoff=handoff, status=body.status, assignee=body.assignee)
        return Response(HANDOFF.render(handoff))
