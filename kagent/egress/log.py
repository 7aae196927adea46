"""The egress log: every attempt as an `EgressEvent` (made by the client unsaved, as the recorder receives it) and the
default recorder, which writes it as one row. Never query strings, headers, bodies or secret values."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kagent.models import EgressEvent

logger = logging.getLogger(__name__)


Recorder = Callable[["EgressEvent"], None]


_INSERT_SQL = """
INSERT INTO kagent_egressevent (project_id, purpose, method, host, port, path, resolved_address, decision, code,
    status, bytes_received, duration_ms, created_at)
VALUES (%(project_id)s, %(purpose)s, %(method)s, %(host)s, %(port)s, %(path)s, %(resolved_address)s, %(decision)s,
    %(code)s, %(status)s, %(bytes_received)s, %(duration_ms)s, %(created_at)s)
"""


def record_in_log(record: EgressEvent) -> None:
    """The one writer of the egress log: one EgressEvent row (one prepared statement), written as soon as the
    exchange is over — a worker that dies before a call's result is written loses no attempt from the log. A failure
    to record is logged, never raised into the call."""
    from django.db import DatabaseError, connection, transaction
    from django.utils import timezone

    from kagent.sql import execute

    values = {
        "project_id": record.project_id,
        "purpose": record.purpose[:30],
        "method": record.method[:10],
        "host": record.host[:255],
        "port": record.port,
        "path": record.path[:500],
        "resolved_address": record.resolved_address[:64],
        "decision": record.decision,
        "code": record.code[:40],
        "status": record.status,
        "bytes_received": record.bytes_received,
        "duration_ms": record.duration_ms,
        "created_at": timezone.now(),
    }
    try:
        if connection.in_atomic_block:  # a savepoint, so a failed insert cannot poison the caller's transaction
            with transaction.atomic():
                execute(_INSERT_SQL, values)
        else:
            execute(_INSERT_SQL, values)
    except DatabaseError:
        logger.exception("could not record an egress event for %s", record.host)
