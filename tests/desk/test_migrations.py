"""The desk's move out of `runs` (desk/migrations/0001, runs/migrations/0011) is by state only: a database made
before it keeps its tables, rows and constraints, and the desk's models read and write them."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from desk.models import Handoff, Ticket, TicketCounter
from tests.migrations import migrate, migrate_to_the_latest, schema

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("desk", None)]  # unapplied, and so is `runs` 0011: `runs` as it was, the desk's models its own
BEFORE_STATE = [("runs", "0010_foreign_keys_checked_in_statement")]
AFTER = [("desk", "0001_initial"), ("runs", "0011_desk_moved_to_its_app")]
TABLES = ("runs_ticket", "runs_handoff", "runs_ticketcounter")


def test_rows_made_before_the_move_are_the_desks_after_it(alice):
    from agents.services import agent_create

    agent = agent_create(project=alice.project, name="A")
    after = schema(TABLES)
    apps = migrate(BEFORE, BEFORE_STATE)
    try:
        assert schema(TABLES) == after  # nothing to undo either
        session = apps.get_model("runs", "Session").objects.create(project_id=alice.project.pk, agent_id=agent.pk)
        apps.get_model("runs", "TicketCounter").objects.create(project_id=alice.project.pk, last_number=7)
        ticket = apps.get_model("runs", "Ticket").objects.create(
            project_id=alice.project.pk, number=7, title="t", description="d", session=session, rate_key="eu:x"
        )
        handoff = apps.get_model("runs", "Handoff").objects.create(
            project_id=alice.project.pk, session=session, reason_type="complaint", summary="s", tool_call_id="call_1"
        )
        migrate(AFTER, AFTER)
        assert schema(TABLES) == after
        assert Ticket.objects.get(pk=ticket.pk).display_number == "TKT-7"
        assert Ticket.objects.get(pk=ticket.pk).session_id == session.pk
        assert Handoff.objects.get(tool_call_id="call_1").pk == handoff.pk
        assert TicketCounter.objects.get(project=alice.project).last_number == 7
        with pytest.raises(IntegrityError), transaction.atomic():  # the constraint is the one made by `runs`
            Ticket.objects.create(project=alice.project, number=7, title="t", description="d", rate_key="eu:y")
    finally:
        migrate_to_the_latest()
