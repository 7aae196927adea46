"""The Celery app. Configuration comes from Django settings (CELERY_*)."""

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_process_init
from django.db import close_old_connections, connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kagent.settings")

app = Celery("kagent")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _no_health_check_per_task(**kwargs: object) -> None:
    """A task's first statement is its claim, which reconnects once on a broken connection (runs/engine.py): no
    `SELECT 1` before every task."""
    connections["default"].settings_dict["CONN_HEALTH_CHECKS"] = False


@task_prerun.connect
@task_postrun.connect
def _reuse_database_connections(sender: object = None, **kwargs: object) -> None:
    """Workers keep their database connection between tasks, as web requests do: closed only when broken or older
    than CONN_MAX_AGE. (Celery's Django fixup would otherwise close it around every task — a new PostgreSQL
    connection per run; `CELERY_DB_REUSE_MAX` in settings turns that off.) A task run eagerly, inside the caller's
    transaction, leaves the caller's connection alone."""
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    close_old_connections()
