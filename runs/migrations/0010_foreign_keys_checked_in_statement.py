# The foreign keys of the tables a run writes are checked by the statement that writes the row (NOT DEFERRABLE),
# not at its commit (Django makes every foreign key DEFERRABLE INITIALLY DEFERRED).
#
# A deferred check is fired at COMMIT, outside any statement, and PostgreSQL's own statistics count each one as a
# statement of its own: pg_stat_statements listed 15 `SELECT 1 FROM ONLY "public"."runs_run" x WHERE "id" = $1 FOR
# KEY SHARE OF x`-shaped checks beside a run's 6 statements (every event, step and tool call row checks its run;
# the run its project, agent, version and key; a tool call and an egress log row their project). Checked in the
# statement, the same checks are part of it (a trigger of the statement, counted with it), and a bad reference
# fails the statement that made it rather than a later COMMIT.
#
# What it changes besides: a key's row lock (FOR KEY SHARE on the row referred to) is taken when the row is written,
# not at COMMIT, so a transaction of several statements takes its locks in another order (runs/builtin_tools.py
# takes a session's row first for that; tests/runs/test_desk_locks.py). Nothing inserts a row before the row it
# refers to within a transaction. Django's deletion collector orders deletes only for keys that can't be null: the
# deletion of a session and of a project with everything a run writes is tested (tests/runs/test_store.py, which
# also keeps these keys immediate: a later migration that re-creates one, deferred as Django does, fails it).

from django.db import migrations

# The tables written by creating and executing runs, sessions included (events, steps, calls, messages, the desk's
# handoffs and tickets, the egress log, the webhook outbox).
RUN_TABLES = (
    "runs_run",
    "runs_runevent",
    "runs_runstep",
    "runs_toolcall",
    "runs_message",
    "runs_session",
    "runs_segment",
    "runs_enduser",
    "runs_handoff",
    "runs_ticket",
    "runs_ticketcounter",
    "kagent_egressevent",
    "hooks_webhookevent",
    "hooks_webhookdelivery",
)

# The keys of the tables of that name in the schema Django's tables are in (the first of the search path).
_KEYS = """
SELECT c.relname, con.conname FROM pg_constraint AS con JOIN pg_class AS c ON c.oid = con.conrelid
WHERE con.contype = 'f' AND c.relnamespace = current_schema()::regnamespace AND c.relname = ANY(%s)
    AND con.condeferrable = %s
ORDER BY 1, 2
"""
# ALTER CONSTRAINT changes the catalog only, but takes each table's ACCESS EXCLUSIVE lock: behind a long transaction
# of a worker still running during the deploy it would wait, and every read of the table would queue behind it.
# Waiting at most this long, the migration fails instead (nothing changed: it is one transaction); run it again.
LOCK_TIMEOUT = "SET LOCAL lock_timeout = '10s'"


def _alter(deferrable: bool, to: str, tables: tuple[str, ...] = RUN_TABLES):  # type: ignore[no-untyped-def]
    def run(apps, schema_editor):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor != "postgresql":
            return
        quote = schema_editor.quote_name
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(_KEYS, [list(tables), deferrable])
            keys = cursor.fetchall()
        schema_editor.execute(LOCK_TIMEOUT)
        for table, name in keys:
            schema_editor.execute(f"ALTER TABLE {quote(table)} ALTER CONSTRAINT {quote(name)} {to}")

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0009_message_unverified_claims"),
        ("kagent", "0004_api_key_allowed_origins"),
        ("hooks", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(
            _alter(True, "NOT DEFERRABLE"),
            _alter(False, "DEFERRABLE INITIALLY DEFERRED"),
        ),
    ]
