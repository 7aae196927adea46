"""The short forms of the load and fault benchmarks (issue #12), in CI: `bench/faults.py --quick` on throwaway
PostgreSQL and Redis servers of its own (free ports), with gunicorn, two Celery workers and beat — the load of 40
runs, the model's and the business API's failures, a worker SIGKILLed during load, Redis and PostgreSQL restarted
mid-load. Each scenario prints its figures and PASS or FAIL; every one must pass."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PG_BIN = Path(os.environ.get("KAGENT_PG_BIN", "/usr/lib/postgresql/15/bin"))
SCENARIOS = ("load", "upstream", "worker_kill", "redis", "postgres")


def free_port() -> int:
    sys.path.insert(0, str(ROOT / "bench"))
    from stack import free_port as pick

    return pick()


@pytest.mark.worker
@pytest.mark.timeout(600)
def test_load_and_faults_short_form():
    assert (PG_BIN / "initdb").exists(), f"PostgreSQL's server binaries are needed at {PG_BIN} (KAGENT_PG_BIN)"
    assert shutil.which("redis-server"), "redis-server is needed on PATH"
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")}
    argv = [sys.executable, "bench/faults.py", "--quick", "--pg-port", str(free_port())]
    argv += ["--redis-port", str(free_port())]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=580)  # noqa: S603
    print(done.stdout[-20000:])
    print(done.stderr[-5000:])
    for name in SCENARIOS:
        assert f"{name}: PASS" in done.stdout, f"scenario {name} did not pass (see the output above)"
    assert done.returncode == 0
