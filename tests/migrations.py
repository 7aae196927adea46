"""What the tests of a state-only move share: migrating to a point (and the state there), back to the latest, and
the tables as PostgreSQL has them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets: list[tuple[str, str | None]], state: list[tuple[str, str | None]]) -> Any:
    """Migrates to `targets`; the models as they are at `state`."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(state).apps


def migrate_to_the_latest() -> None:
    """Every app at its latest migration again, as the rest of the suite expects."""
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def schema(tables: Iterable[str]) -> list[tuple[object, ...]]:
    """The tables as PostgreSQL has them: columns, then constraints, then indexes."""
    names = list(tables)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, data_type, is_nullable, character_maximum_length "
            "FROM information_schema.columns WHERE table_name = ANY(%s) ORDER BY 1, 2",
            [names],
        )
        columns = cursor.fetchall()
        cursor.execute(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), condeferrable FROM pg_constraint "
            "WHERE conrelid::regclass::text = ANY(%s) ORDER BY 1, 2",
            [names],
        )
        constraints = cursor.fetchall()
        cursor.execute(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) ORDER BY 1, 2",
            [names],
        )
        return columns + constraints + cursor.fetchall()
