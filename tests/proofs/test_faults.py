"""The short forms of the load and fault benchmarks (issue #12), in CI: `bench/faults.py --quick` on throwaway
PostgreSQL and Redis servers of its own (kagent/embedded.py), with gunicorn, two Celery workers and beat — the load
of 40 runs, the model's and the business API's failures, a worker SIGKILLed during load, Redis and PostgreSQL restarted
mid-load. Each scenario prints its figures and PASS or FAIL; every one must pass."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCENARIOS = ("load", "upstream", "worker_kill", "redis", "postgres")


@pytest.mark.worker
@pytest.mark.timeout(600)
def test_load_and_faults_short_form():
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")}
    argv = [sys.executable, "bench/faults.py", "--quick"]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=580)  # noqa: S603
    print(done.stdout[-20000:])
    print(done.stderr[-5000:])
    for name in SCENARIOS:
        assert f"{name}: PASS" in done.stdout, f"scenario {name} did not pass (see the output above)"
    assert done.returncode == 0
