"""Statements written by hand, for the few reads and writes on the hot path of every run where building them with
the ORM cost more than running them (measured in bench/runs_bench.py): the API key lookup of every request here,
the run engine's and run creation's statements in `runs/store.py`. Everything else uses the ORM.

`execute` runs one statement on a server-side-binding cursor, prepared on first use on the connection (connections
live on in each process's pool between requests and tasks), and logs it where Django logs queries (so
`CaptureQueriesContext` and the benchmark count it like any other).

Prepared for real: Django opens psycopg connections with `prepare_threshold=None` (for connection poolers in
transaction mode), which turns psycopg's preparation off even for `prepare=True`; every statement here was then
parsed, analysed and planned again on every call (seen as `execute <unnamed>` in PostgreSQL's log and as the
parser's functions in `perf`). `execute` sets a threshold no other query reaches, so the statements of this module
and only they are prepared (Django's ORM uses client-side-binding cursors, which never prepare). Behind a pooler in
transaction mode (PgBouncer before 1.21) prepared statements don't work: point `DATABASE_URL` at PostgreSQL or at
a pooler that tracks them.
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Sequence
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, InterfaceError, NotSupportedError, OperationalError, connection, connections
from psycopg.pq import ExecStatus

from kagent.models import ApiKey, Project

# psycopg prepares a statement once it has run this many times unprepared, or at once when asked (`prepare=True`):
# asked is the only way here.
_ONLY_WHEN_ASKED = 2**62
_TUPLES_OK = ExecStatus.TUPLES_OK


def execute(sql: str, params: dict[str, Any] | Sequence[Any]) -> list[tuple[Any, ...]]:
    try:
        return _execute(sql, params)
    except NotSupportedError as error:
        # A statement prepared on a kept connection whose result changed since (a deploy altered a column it
        # returns): PostgreSQL refuses to run it, before running anything, until it is prepared again. In a
        # transaction its rollback has psycopg forget its statements; in autocommit, once more after forgetting them.
        if connection.in_atomic_block or "cached plan must not change result type" not in str(error):
            raise
        raw = connection.connection
        assert raw is not None  # the statement just ran on it
        # Every statement prepared on this connection may be stale: forget them all, here and on the server (psycopg
        # clears its own record when it sees DEALLOCATE ALL succeed), and keep the connection. Each connection of the
        # pool recovers so, at its first stale statement.
        raw.execute("DEALLOCATE ALL")
        return _execute(sql, params)


def _execute(sql: str, params: dict[str, Any] | Sequence[Any]) -> list[tuple[Any, ...]]:
    db = connections[DEFAULT_DB_ALIAS]  # once: each `connection.…` is a lookup in a context-local
    db.ensure_connection()
    started = time.monotonic()
    with db.wrap_database_errors:
        cursor = _kept_cursor(db)
        cursor.execute(sql, params, prepare=True)
        # (Not `cursor.description`: it builds a Column object for every column on every call.)
        result = cursor.pgresult
        rows = cursor.fetchall() if result is not None and result.status == _TUPLES_OK else []
    if db.queries_logged:
        db.queries_log.append({"sql": sql, "time": f"{time.monotonic() - started:.3f}"})
    return rows


# The kept cursor of each connection, kept as long as the connection lives (in the process's pool between checkouts).
_CURSORS: weakref.WeakKeyDictionary[Any, psycopg.Cursor[Any]] = weakref.WeakKeyDictionary()


def _kept_cursor(db: Any) -> psycopg.Cursor[Any]:
    """One server-side-binding cursor per database connection, kept with it: its adaptation context remembers how
    each Python type is dumped and each column type loaded, which a new cursor per statement looked up again every
    time. (A connection is one thread's at a time, from its checkout from the pool to its return.)"""
    raw = db.connection
    assert raw is not None
    cursor = _CURSORS.get(raw)
    if cursor is None or cursor.closed:
        if raw.prepare_threshold is None:
            raw.prepare_threshold = _ONLY_WHEN_ASKED
        cursor = _CURSORS[raw] = psycopg.Cursor(raw)
    return cursor


_API_KEY_SQL = """
SELECT key.id, key.kind, key.name, key.hint, key.created_at, key.last_used_at, key.revoked_at, key.allowed_origins,
    project.id, project.organization_id, project.name, project.created_at, project.api_rate_secret,
    project.api_rate_publishable, project.run_rate_publishable
FROM kagent_apikey AS key JOIN kagent_project AS project ON project.id = key.project_id
WHERE key.digest = %(digest)s
"""


_PROJECT_FIELDS = (
    "id",
    "organization_id",
    "name",
    "created_at",
    "api_rate_secret",
    "api_rate_publishable",
    "run_rate_publishable",
)


def first_read(sql: str, params: dict[str, Any] | Sequence[Any]) -> list[tuple[Any, ...]]:
    """`execute` for a request's first statement, a read, standing in for a health check (a round trip before the
    first statement of every request): a connection from the pool found broken (the database restarted while it
    waited there) is given back, which drops it, and the read is tried once more on another. A read tried twice
    changes nothing."""
    try:
        return execute(sql, params)
    except (InterfaceError, OperationalError):
        if connection.in_atomic_block:
            raise
        connection.close()
        return execute(sql, params)


def api_key_by_digest(digest: str) -> ApiKey | None:
    """The API key with this digest, with its project (every API request's first statement)."""
    rows = first_read(_API_KEY_SQL, {"digest": digest})
    if not rows:
        return None
    row = rows[0]
    (key_id, kind, name, hint, created_at, last_used_at, revoked_at, origins, *project_values) = row
    project = Project(**dict(zip(_PROJECT_FIELDS, project_values, strict=True)))
    key = ApiKey(
        id=key_id,
        project=project,
        kind=kind,
        name=name,
        digest=digest,
        hint=hint,
        created_at=created_at,
        last_used_at=last_used_at,
        revoked_at=revoked_at,
        # Django has psycopg load jsonb as text (JSONField parses it): the same here.
        allowed_origins=json.loads(origins) if isinstance(origins, str) else origins,
    )
    for made in (project, key):
        made._state.adding = False
    return key


def jsonb_loaded(value: Any) -> Any:
    """A jsonb column as read by hand: Django's psycopg setup loads jsonb as text (for JSONField's own decoding)."""
    return json.loads(value) if isinstance(value, str) else value


def json_text(value: Any) -> str:
    """A value as the JSON text a jsonb parameter is sent as."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
