"""The checks' move out of `agents` (checks/migrations/0001, agents 0007) is by state only: a database migrated by the
main of before keeps its checks and check runs, read and written by the checks app."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from checks.models import Check, CheckRun
from tests.migrations import migrate, migrate_to_the_latest

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("checks", None)]  # unapplied, and so is agents 0007: the models are `agents`' own
BEFORE_STATE = [("agents", "0006_checks")]


def columns() -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_name IN ('agents_check', 'agents_checkrun') ORDER BY 1, 2"
        )
        return cursor.fetchall()


def test_checks_made_before_the_move_are_the_checks_apps_after_it(alice):
    from agents.services import agent_create

    agent = agent_create(project=alice.project, name="A")
    after = columns()
    apps = migrate(BEFORE, BEFORE_STATE)
    try:
        assert columns() == after
        check = apps.get_model("agents", "Check").objects.create(
            project_id=alice.project.pk, agent_id=agent.pk, name="Refund", input="hi", expect={"status": "completed"}
        )
        check_run = apps.get_model("agents", "CheckRun").objects.create(
            project_id=alice.project.pk, agent_id=agent.pk, status="passed", results=[{"check": check.pk}]
        )
        migrate_to_the_latest()
        assert columns() == after
        assert Check.objects.get(pk=check.pk).expect == {"status": "completed"}
        assert CheckRun.objects.get(pk=check_run.pk).results == [{"check": check.pk}]
        assert list(agent.checks.values_list("pk", flat=True)) == [check.pk]
    finally:
        migrate_to_the_latest()


def test_the_move_runs_no_sql() -> None:
    executor = MigrationExecutor(connection)
    for app, name in (("checks", "0001_initial"), ("agents", "0007_checks_moved_to_their_app")):
        migration = executor.loader.get_migration(app, name)
        state = executor.loader.project_state((app, name), at_end=False)
        with connection.schema_editor(collect_sql=True, atomic=False) as editor:
            migration.apply(state, editor, collect_sql=True)
        assert [sql for sql in editor.collected_sql if not sql.startswith("--")] == [], name
