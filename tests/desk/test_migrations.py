"""The desk's move out of `runs` (desk/migrations/0001, runs/migrations/0011) is by state only: a database made
before it keeps its tables, rows and constraints, and the desk's models read and write them."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from desk.models import Handoff, Ticket, TicketCounter

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("desk", None)]  # unapplied, and so is `runs` 0011: `runs` as it was, the desk's models its own
BEFORE_STATE = [("runs", "0010_foreign_keys_checked_in_statement")]
AFTER = [("desk", "0001_initial"), ("runs", "0011_desk_moved_to_its_app")]
TABLES = ("runs_ticket", "runs_handoff", "runs_ticketcounter")


def migrate(targets, state):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(state).apps


def migrate_to_the_latest() -> None:
    """Every app at its latest migration again, as the rest of the suite expects (migrating to AFTER would undo
    any later migration of `runs`)."""
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def schema() -> list[tuple[object, ...]]:
    """The desk's tables as PostgreSQL has them: columns, then constraints, then indexes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, data_type, is_nullable, character_maximum_length "
            "FROM information_schema.columns WHERE table_name = ANY(%s) ORDER BY 1, 2",
            [list(TABLES)],
        )
        columns = cursor.fetchall()
        cursor.execute(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), condeferrable FROM pg_constraint "
            "WHERE conrelid::regclass::text = ANY(%s) ORDER BY 1, 2",
            [list(TABLES)],
        )
        constraints = cursor.fetchall()
        cursor.execute(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) ORDER BY 1, 2",
            [list(TABLES)],
        )
        return columns + constraints + cursor.fetchall()


def test_rows_made_before_the_move_are_the_desks_after_it(alice):
    from agents.services import agent_create

    agent = agent_create(project=alice.project, name="A")
    after = schema()
    apps = migrate(BEFORE, BEFORE_STATE)
    try:
        assert schema() == after  # nothing to undo either
        session = apps.get_model("runs", "Session").objects.create(project_id=alice.project.pk, agent_id=agent.pk)
        apps.get_model("runs", "TicketCounter").objects.create(project_id=alice.project.pk, last_number=7)
        ticket = apps.get_model("runs", "Ticket").objects.create(
            project_id=alice.project.pk, number=7, title="t", description="d", session=session, rate_key="eu:x"
        )
        handoff = apps.get_model("runs", "Handoff").objects.create(
            project_id=alice.project.pk, session=session, reason_type="complaint", summary="s", tool_call_id="call_1"
        )
        migrate(AFTER, AFTER)
        assert schema() == after
        assert Ticket.objects.get(pk=ticket.pk).display_number == "TKT-7"
        assert Ticket.objects.get(pk=ticket.pk).session_id == session.pk
        assert Handoff.objects.get(tool_call_id="call_1").pk == handoff.pk
        assert TicketCounter.objects.get(project=alice.project).last_number == 7
        with pytest.raises(IntegrityError), transaction.atomic():  # the constraint is the one made by `runs`
            Ticket.objects.create(project=alice.project, number=7, title="t", description="d", rate_key="eu:y")
    finally:
        migrate_to_the_latest()
