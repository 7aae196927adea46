"""What every benchmark script shares: the repo on `sys.path`, Django on the benchmark's database, the child
processes and the Celery worker's command line.

A script in bench/ (run as `.venv/bin/python bench/<script>.py`, so bench/ is on `sys.path`) imports from here first:

    from env import ROOT, Processes, servers, setup_django_fresh, worker_command

- `ROOT`: the repository, put on `sys.path` once when this module is imported (the project's packages importable);
- `servers(database_url, redis_url, name)`: the PostgreSQL and Redis given, or throwaway embedded ones;
- `recreate_database(url)`, `drop_database(url)`, `cleanup_redis(url, queue)`: the benchmark's own database and
  queue, made fresh and removed;
- `django_environment(…)` and `setup_django(environment)`: the one way a script's own process runs Django (the
  variables it sets, then `django.setup()` and the migrations); `setup_django_fresh(…)` does both on a fresh database;
- `Processes`, `ready_line(proc, what)`, `wait_ready(proc, log)`: child processes, each in its own session, all
  stopped on exit; a fake's `ready …` line; a worker's "ready." in its log;
- `worker_command(queue, name, pool=…, concurrency=…)`: the Celery worker a benchmark starts (`worker_options`: its
  queue, name and the options of a worker alone).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ENCRYPTION_KEY = "a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s="


# --- processes ----------------------------------------------------------------------------------------------------


class Processes:
    """Every child process, each in its own session; all stopped on exit (normal, exception, Ctrl-C, SIGTERM)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[Any]] = []

    def start(self, argv: list[str], *, env: dict[str, str], log: Path | None = None) -> subprocess.Popen[Any]:
        out: Any = open(log, "wb") if log else subprocess.PIPE  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(  # noqa: S603
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT if log else None,
            start_new_session=True,
        )
        if log:
            out.close()  # the child has its own copy
        self.procs.append(proc)
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[Any], timeout: float = 20) -> None:
        if proc.poll() is None:
            # The leader only: a Celery worker then shuts down warm (a task finishing its last statements is let
            # finish, not killed and re-delivered). Whatever is left of the group is killed below.
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        # A prefork child can outlive its parent for a moment: the group is ours, make sure it is gone.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        for stream in (proc.stdin, proc.stdout):
            if stream:
                with contextlib.suppress(OSError):
                    stream.close()

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            self.stop(proc, timeout=10)
        self.procs.clear()


def ready_line(proc: subprocess.Popen[Any], what: str) -> list[str]:
    """The words of the first line a fake of fakes/ prints once it listens (`ready <host> <port>` or `ready <url>`)."""
    assert proc.stdout is not None
    words: list[str] = proc.stdout.readline().decode().split()
    if not words or words[0] != "ready":
        raise SystemExit(f"{what} did not start")
    return words


def wait_ready(proc: subprocess.Popen[Any], log: Path) -> None:
    """Until a Celery worker started with `log` says "ready." in it (90 s at most, or it exits: SystemExit)."""
    deadline = time.monotonic() + 90
    while "ready." not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the worker did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)


# --- the Celery worker --------------------------------------------------------------------------------------------


def worker_options(queue: str, name: str) -> list[str]:
    """A benchmark's worker: on its own queue, by its own name, alone (no gossip, mingle or heartbeat with others)."""
    return ["-Q", queue, "-n", name, "--without-gossip", "--without-mingle", "--without-heartbeat"]


def worker_command(queue: str, name: str, *, pool: str, concurrency: int) -> list[str]:
    """The command line of the Celery worker a benchmark starts (`processes.start(worker_command(…), …)`)."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "kagent",
        "worker",
        "-l",
        "info",
        "--pool",
        pool,
        "--concurrency",
        str(concurrency),
        *worker_options(queue, name),
    ]


# --- the database and Redis ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def servers(database_url: str, redis_url: str, name: str) -> Any:
    """The benchmark's PostgreSQL database and Redis: the URLs given, or else (on a machine with neither, as after
    `bin/run`'s install) throwaway embedded servers of the wheels (kagent/embedded.py), database `name`."""
    if database_url and redis_url:
        yield database_url, redis_url
        return
    from kagent import embedded

    with embedded.throwaway() as started:
        yield database_url or started.postgres.url(name), redis_url or started.redis.url()


def recreate_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if "bench" not in name or not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise SystemExit(f"refusing to drop {name!r}: the benchmark database's name must contain 'bench'")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cleanup_redis(url: str, queue: str) -> None:
    """The benchmark's queue and its bindings removed from Redis (nothing said if Redis is gone)."""
    with contextlib.suppress(Exception):
        import redis

        client = redis.Redis.from_url(url)
        client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        client.close()


# --- Django -------------------------------------------------------------------------------------------------------


def django_environment(database_url: str, redis_url: str, tmp: Path) -> dict[str, str]:
    """The variables a benchmark's Django reads, in this process and in the servers and workers it starts: the
    database and Redis, a throwaway key and folder, no debug, warnings only."""
    return {
        "DEBUG": "false",
        "SECRET_KEY": "bench-only-secret-key",
        "KAGENT_ENCRYPTION_KEYS": ENCRYPTION_KEY,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "KAGENT_VAR_DIR": str(tmp / "var"),
        "LOG_LEVEL": "WARNING",
    }


def setup_django(environment: dict[str, str]) -> float:
    """This process's Django: `environment` (django_environment's, and the script's own) in os.environ with
    kagent.settings, `django.setup()`, the migrations run. Returns the seconds the migrations took."""
    os.environ.update(environment)
    os.environ["DJANGO_SETTINGS_MODULE"] = "kagent.settings"
    import django

    django.setup()
    from django.core.management import call_command

    started = time.monotonic()
    call_command("migrate", verbosity=0)
    return time.monotonic() - started


def setup_django_fresh(database_url: str, redis_url: str, tmp: Path) -> None:
    """This process's Django on the benchmark's database, dropped and created fresh first (recreate_database)."""
    recreate_database(database_url)
    setup_django(django_environment(database_url, redis_url, tmp))
