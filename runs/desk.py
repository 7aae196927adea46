"""The desk: tickets and handoffs the agents made. Test-panel (sandbox) ones stay off the default views."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from kagent.api import ProjectApi, paginate, request_object, unix
from kagent.errors import NotFound, Unprocessable
from kagent.openapi import TIMESTAMP, component, json_body, list_of
from runs.models import Handoff, Ticket

TICKET_SCHEMA = component(
    "Ticket",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "ticket"},
            "number": {"type": "string", "example": "TKT-12"},
            "title": {"type": "string"},
            "description": {"type": "string"},
            "priority": {"enum": ["low", "normal", "high", "urgent"]},
            "resolution_attempted": {"type": "string"},
            "status": {"enum": ["open", "closed"]},
            "end_user": {"type": ["string", "null"]},
            "session": {"type": ["string", "null"]},
            "is_test": {"type": "boolean"},
            "created_at": TIMESTAMP,
        },
    },
)
HANDOFF_SCHEMA = component(
    "Handoff",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "handoff"},
            "session": {"type": ["string", "null"]},
            "end_user": {"type": ["string", "null"]},
            "reason_type": {"type": "string"},
            "summary": {"type": "string"},
            "status": {"enum": ["open", "closed"]},
            "is_test": {"type": "boolean"},
            "created_at": TIMESTAMP,
        },
    },
)
FILTERS = [
    OpenApiParameter("status", str, enum=["open", "closed"]),
    OpenApiParameter("include_tests", bool, description="include test-panel objects (off by default)"),
]


def render_ticket(ticket: Ticket) -> dict[str, Any]:
    return {
        "id": ticket.pk,
        "object": "ticket",
        "number": ticket.display_number,
        "title": ticket.title,
        "description": ticket.description,
        "priority": ticket.priority,
        "resolution_attempted": ticket.resolution_attempted,
        "status": ticket.status,
        "end_user": ticket.end_user.external_id if ticket.end_user else None,
        "session": ticket.session_id,
        "is_test": ticket.is_test,
        "created_at": unix(ticket.created_at),
    }


def render_handoff(handoff: Handoff) -> dict[str, Any]:
    return {
        "id": handoff.pk,
        "object": "handoff",
        "session": handoff.session_id,
        "end_user": handoff.end_user.external_id if handoff.end_user else None,
        "reason_type": handoff.reason_type,
        "summary": handoff.summary,
        "status": handoff.status,
        "is_test": handoff.is_test,
        "created_at": unix(handoff.created_at),
    }


def _filtered(request: Request, queryset: QuerySet) -> QuerySet:
    status = request.query_params.get("status")
    if status is not None:
        if status not in ("open", "closed"):
            raise Unprocessable("invalid_parameter", "status is open or closed.")
        queryset = queryset.filter(status=status)
    if request.query_params.get("include_tests") not in ("true", "1"):
        queryset = queryset.filter(is_test=False)
    return queryset


class TicketListApi(ProjectApi):
    @extend_schema(operation_id="tickets_list", parameters=FILTERS, responses=list_of(TICKET_SCHEMA))
    def get(self, request: Request) -> Response:
        tickets = Ticket.objects.filter(project=self.project).select_related("end_user")
        return Response(paginate(request, _filtered(request, tickets), render_ticket))


class TicketDetailApi(ProjectApi):
    def _ticket(self, ticket_id: str) -> Ticket:
        ticket = Ticket.objects.filter(project=self.project, pk=ticket_id).select_related("end_user").first()
        if ticket is None:
            raise NotFound("No ticket with that id in this project.")
        return ticket

    @extend_schema(operation_id="tickets_retrieve", responses={200: TICKET_SCHEMA})
    def get(self, request: Request, ticket_id: str) -> Response:
        return Response(render_ticket(self._ticket(ticket_id)))

    @extend_schema(
        operation_id="tickets_update",
        request=json_body(
            {
                "type": "object",
                "properties": {
                    "status": {"enum": ["open", "closed"]},
                    "priority": {"enum": ["low", "normal", "high", "urgent"]},
                },
            }
        ),
        responses={200: TICKET_SCHEMA},
    )
    def patch(self, request: Request, ticket_id: str) -> Response:
        ticket = self._ticket(ticket_id)
        data = request_object(request)
        allowed = {"status": ("open", "closed"), "priority": ("low", "normal", "high", "urgent")}
        for key, value in data.items():
            if key not in allowed:
                raise Unprocessable("invalid_request", f"Only status and priority can change, not {str(key)[:40]}.")
            if value not in allowed[key]:
                raise Unprocessable("invalid_request", f"{key} is one of {', '.join(allowed[key])}.")
        if data:
            Ticket.objects.filter(pk=ticket.pk).update(**data)
        return Response(render_ticket(self._ticket(ticket_id)))


class HandoffListApi(ProjectApi):
    @extend_schema(operation_id="handoffs_list", parameters=FILTERS, responses=list_of(HANDOFF_SCHEMA))
    def get(self, request: Request) -> Response:
        handoffs = Handoff.objects.filter(project=self.project).select_related("end_user")
        return Response(paginate(request, _filtered(request, handoffs), render_handoff))
