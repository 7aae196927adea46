"""The egress log: what is recorded of every attempt (`EgressRecord`) and the default recorder, one EgressEvent row.
Never query strings, headers, bodies or secret values."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EgressRecord:
    project_id: str | None
    purpose: str
    method: str
    host: str
    port: int | None
    path: str
    resolved_address: str
    decision: str  # allowed | refused
    code: str
    status: int | None
    bytes_received: int
    duration_ms: int


Recorder = Callable[[EgressRecord], None]


def record_in_log(record: EgressRecord) -> None:
    """The default recorder: one EgressEvent row. A failure to record is logged, never raised into the call."""
    from django.db import DatabaseError, connection, transaction

    from kagent.models import EgressEvent

    try:
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
        }
        if connection.in_atomic_block:  # a savepoint, so a failed insert cannot poison the caller's transaction
            with transaction.atomic():
                EgressEvent.objects.create(**values)
        else:
            EgressEvent.objects.create(**values)
    except DatabaseError:
        logger.exception("could not record an egress event for %s", record.host)
