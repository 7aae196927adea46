"""What the business's webhook endpoints receive of the desk (issue #11): `ticket.created`, `ticket.updated`,
`handoff.created`, `handoff.closed`, recorded through the outbox of `hooks` in the transaction of the change, with
the object exactly as the API renders it then. Test-panel objects are never recorded."""

from __future__ import annotations

from desk.models import Handoff, Ticket
from desk.resources import HANDOFF, TICKET
from hooks import outbox


def ticket_event(ticket: Ticket, event_type: str) -> None:
    if ticket.is_test:
        return
    outbox.record(
        project_id=ticket.project_id,
        event_type=event_type,
        object_id=ticket.pk,
        data=lambda: TICKET.render(Ticket.objects.select_related("end_user").get(pk=ticket.pk)),
    )


def handoff_event(handoff: Handoff, event_type: str) -> None:
    if handoff.is_test:
        return
    outbox.record(
        project_id=handoff.project_id,
        event_type=event_type,
        object_id=handoff.pk,
        data=lambda: HANDOFF.render(Handoff.objects.select_related("end_user").get(pk=handoff.pk)),
    )
