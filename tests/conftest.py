"""Shared fixtures: two tenants (alice's project and bob's), their keys, an API client, a real Celery worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from kagent.models import ApiKey, Membership, Organization, Project, User
from kagent.rendering import Resource
from kagent.services import api_key_create

ROOT = Path(__file__).resolve().parent.parent

# Every object the API renders during the tests is checked against its own OpenAPI schema.
Resource.check_renders = True

pytest_plugins = ["tests.plugins.llm", "tests.plugins.egress", "tests.races"]


@dataclass
class Tenant:
    organization: Organization
    project: Project
    user: User
    secret_key: str
    publishable_key: str

    def client(self, key: str | None = None) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key or self.secret_key}")
        return client


def make_tenant(name: str) -> Tenant:
    organization = Organization.objects.create(name=f"{name} org")
    project = Project.objects.create(organization=organization, name=f"{name} project")
    user = User.objects.create_user(f"{name}@example.com", "correct horse battery")
    Membership.objects.create(organization=organization, user=user, role=Membership.Role.OWNER)
    _, secret = api_key_create(project=project, kind=ApiKey.Kind.SECRET, name="test")
    _, publishable = api_key_create(project=project, kind=ApiKey.Kind.PUBLISHABLE, name="test")
    return Tenant(organization, project, user, secret, publishable)


@pytest.fixture
def alice(db: Any) -> Tenant:
    return make_tenant("alice")


@pytest.fixture
def bob(db: Any) -> Tenant:
    """Someone else's project: everything of alice's must be a 404 to bob."""
    return make_tenant("bob")


@pytest.fixture
def api(alice: Tenant) -> APIClient:
    return alice.client()


def database_url_for_subprocess() -> str:
    """The DATABASE_URL of the database this test session uses (pytest-django's test database), on a TCP server
    or a unix socket (the embedded server's: its folder is the `host` option)."""
    db = settings.DATABASES["default"]
    user = quote(db.get("USER") or "postgres", safe="")
    password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    options = {name: value for name, value in (db.get("OPTIONS") or {}).items() if name != "pool"}  # Django's own
    host = db.get("HOST") or ""
    if host.startswith("/"):
        host, options["host"] = "", host
    netloc = f"{host}:{db['PORT']}" if host and db.get("PORT") else host
    query = f"?{urlencode(options)}" if options else ""
    return f"postgres://{user}{password}@{netloc}/{quote(db['NAME'], safe='')}{query}"


class WorkerProcess:
    """A real `celery worker` process on the configured broker and this session's test database."""

    def __init__(self, queue: str, extra_env: dict[str, str] | None = None, concurrency: int = 1) -> None:
        self.queue = queue
        env = dict(os.environ)
        env.update(
            {
                "DATABASE_URL": database_url_for_subprocess(),
                "KAGENT_CELERY_QUEUE": queue,
                "DEBUG": "false",
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(extra_env or {})
        self.log_path = ROOT / "var" / f"worker-{queue}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "kagent",
                "worker",
                "-l",
                "info",
                "-Q",
                queue,
                "--concurrency",
                str(concurrency),
                "--pool",
                "threads",  # as docker-compose.yml's worker
                "-n",
                f"{queue}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log()}")
            if "ready." in self.log():
                return
            time.sleep(0.2)
        raise RuntimeError(f"worker not ready after {timeout}s:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL the whole process group: the worker dies mid-task, as in a crash."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()


@pytest.fixture
def celery_queue(settings: Any) -> str:
    """A queue of this test's own, so stale messages from other runs can't interfere; tasks sent by the test
    process go there too."""
    from kagent.celery import app

    queue = f"test-{uuid.uuid4().hex[:10]}"
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    yield queue
    app.conf.task_default_queue = previous


@pytest.fixture
def start_worker(celery_queue: str) -> Iterator[Any]:
    workers: list[WorkerProcess] = []

    def start(extra_env: dict[str, str] | None = None, concurrency: int = 1) -> WorkerProcess:
        worker = WorkerProcess(celery_queue, extra_env, concurrency)
        workers.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in workers:
        worker.stop()


def clear_cache() -> None:
    """Empties the cache's own keys. Not `cache.clear()`: on Redis that is FLUSHDB, which would also take the Celery
    broker's queues and the counters of every other test process sharing the database."""
    from django.core.cache import caches
    from django.core.cache.backends.redis import RedisCache

    cache = caches["default"]  # the backend itself: `django.core.cache.cache` is a proxy, never a RedisCache
    if not isinstance(cache, RedisCache):
        cache.clear()
        return
    client = cache._cache.get_client(write=True)
    keys = list(client.scan_iter(match=cache.make_key("*")))
    if keys:
        client.delete(*keys)


def wait_for(predicate: Any, timeout: float = 30, interval: float = 0.1, message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


class _ShiftedClock:
    """Real time, shifted: what kagent/throttle.py reads as its clock in tests."""

    def __init__(self, shift: float) -> None:
        self.shift = shift

    def time(self) -> float:
        return time.time() - self.shift


@pytest.fixture(autouse=True)
def limit_windows_start_with_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request limits count in fixed windows of real time (a minute, 15 minutes, an hour: kagent/throttle.py). A
    test that makes `limit` requests and expects the next one refused would fail whenever a window's edge fell
    between them (it did, in CI). The limits' clock is shifted so that every test starts half a second into a fresh
    hour (and so a fresh minute and quarter hour); the windows go on with real time from there, in this process and
    its live server's threads alike."""
    from kagent import throttle

    now = time.time()
    monkeypatch.setattr(throttle, "time", _ShiftedClock(now % 3600 - 0.5))
