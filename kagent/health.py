"""`GET /healthz`: is the database answering, is the broker answering."""

from __future__ import annotations

import logging

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from kagent.celery import app

logger = logging.getLogger(__name__)


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return bool(cursor.fetchone() == (1,))
    except Exception:
        logger.warning("health: database check failed", exc_info=True)
        return False


def _broker_ok() -> bool:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except Exception:
        logger.warning("health: broker check failed", exc_info=True)
        return False


@csrf_exempt  # GET only: a POST is a 405, and the CSRF check would parse its form body first (up to 2.5 MB)
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    database, broker = _database_ok(), _broker_ok()
    ok = database and broker
    body = {
        "status": "ok" if ok else "degraded",
        "database": "ok" if database else "unavailable",
        "broker": "ok" if broker else "unavailable",
    }
    return JsonResponse(body, status=200 if ok else 503)
