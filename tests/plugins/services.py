"""The test session's PostgreSQL and Redis: with DATABASE_URL / REDIS_URL unset (a fresh machine), throwaway embedded
servers (kagent/embedded.py: the wheels' PostgreSQL 18 and Redis, not durable, in a temporary folder), started before
pytest-django reads the settings and stopped when the session ends. Set, those servers are used as they are.

Loaded with `-p` (pyproject.toml), so this runs before any plugin or conftest; the parallel test processes
(pytest-xdist) are started after it and inherit the URLs, each then making its own test database on the server."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kagent import embedded

_started: list[tuple[embedded.Services, Path]] = []


def _stop() -> None:
    while _started:
        services, folder = _started.pop()
        try:
            services.stop()
        finally:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> None:
    # The scripted model's names (fakes/llm.py) are what the tests' agents ask the operator's endpoint for.
    os.environ.setdefault("KAGENT_OPERATOR_MODELS", "script:*")
    wanted = [name for name in ("DATABASE_URL", "REDIS_URL") if not os.environ.get(name, "").strip()]
    if not wanted:
        return
    folder = Path(tempfile.mkdtemp(prefix="kagent-test-"))
    folder.chmod(0o711)  # searchable by the server's account when we are root (it owns only its data folder)
    services = embedded.Services.under(folder, durable=False)
    _started.append((services, folder))
    atexit.register(_stop)  # also when the session ends in an error before pytest_unconfigure
    try:
        services.start()
    except embedded.EmbeddedError as error:
        _stop()
        raise pytest.UsageError(f"the embedded PostgreSQL and Redis did not start: {error}") from error
    for name, value in services.environment().items():
        if name in wanted:
            os.environ[name] = value


def pytest_unconfigure(config: Any) -> None:
    if not hasattr(config, "workerinput"):  # the session's own process, not a parallel test process
        _stop()
