"""A real Celery worker process on the configured broker runs a task end to end."""

import uuid

import pytest
from django.core.cache import cache

from kagent.tasks import ping
from tests.conftest import wait_for


@pytest.mark.worker
def test_real_worker_runs_a_task(start_worker):
    worker = start_worker()
    token = uuid.uuid4().hex
    ping.delay(token)
    assert wait_for(lambda: cache.get(f"kagent:ping:{token}"), timeout=30, message="the worker to answer") == "pong"
    assert "kagent.ping" in worker.log()
