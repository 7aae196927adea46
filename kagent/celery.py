"""The Celery app. Configuration comes from Django settings (CELERY_*)."""

import logging
import os

from celery import Celery
from celery.app import trace
from celery.signals import task_postrun, task_prerun
from django.db import close_old_connections
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kagent.settings")
# Our Redis transport by a name a broker URL can carry (`kagent+socket://…` for a unix socket; settings).
TRANSPORT_ALIASES["kagent"] = "kagent.broker:Transport"

app = Celery("kagent")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


_PER_TASK_LINES = (trace.LOG_RECEIVED, trace.LOG_SUCCESS)


class _NoLinePerRun(logging.Filter):
    """Drops Celery's two INFO lines for every run's task ("Task runs.execute[…] received", "… succeeded in …"): at
    production volume they are most of a worker's log and about 3% of its CPU, and a run's every step is
    recorded with the run (its events and steps). Its other lines (a retry, a failure) and the lines of every other
    task stay."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = record.args
        return not (
            record.msg in _PER_TASK_LINES and isinstance(context, dict) and context.get("name") == "runs.execute"
        )


for _logger in ("celery.worker.strategy", "celery.app.trace"):
    logging.getLogger(_logger).addFilter(_NoLinePerRun())


@task_prerun.connect
@task_postrun.connect
def _reuse_database_connections(sender: object = None, **kwargs: object) -> None:
    """A task's database connection goes back to the process's pool when the task starts and ends, as a web request's
    does (Django's pool, settings). (Celery's Django fixup would otherwise close it for good around every task — a new
    PostgreSQL connection per run; `CELERY_DB_REUSE_MAX` in settings turns that off.) A task run eagerly, inside the
    caller's transaction, leaves the caller's connection alone."""
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    close_old_connections()
