"""Runs web + Celery worker + Celery beat in the foreground; Ctrl-C stops all three.

If one of them exits, the others are stopped too and the exit status is non-zero.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def main() -> int:
    host = os.environ.get("KAGENT_HOST", "127.0.0.1")
    port = os.environ.get("KAGENT_PORT", "8000")
    var = Path(os.environ.get("KAGENT_VAR_DIR", ROOT / "var"))
    var.mkdir(parents=True, exist_ok=True)
    commands = {
        "web": [PY, "manage.py", "runserver", f"{host}:{port}", "--noreload"],
        # Threads, as docker-compose.yml's worker: a run waiting on the model holds a thread, not a process.
        "worker": [
            *(PY, "-m", "celery", "-A", "kagent", "worker", "-l", "info"),
            *("--pool", "threads", "--concurrency", "50", "-n", "worker@%h"),
        ],
        "beat": [PY, "-m", "celery", "-A", "kagent", "beat", "-l", "info", "-s", str(var / "celerybeat-schedule")],
    }
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for name, cmd in commands.items():
        # Each child in its own process group, so Ctrl-C reaches them through us, in order.
        procs[name] = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)  # noqa: S603
    print(f"K-Agent: dashboard and API on http://{host}:{port}/  (Ctrl-C stops web, worker and beat)", flush=True)

    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    failed = None
    while not stopping:
        for name, proc in procs.items():
            if proc.poll() is not None:
                failed = name
                stopping = True
                break
        time.sleep(0.3)

    # SIGTERM to each main process (a Celery worker then stops its pool itself: warm shutdown), then, after a
    # grace period, SIGKILL to whatever is left of each process group, pool children included: nothing outlives us.
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs.values():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    if failed:
        print(f"K-Agent: {failed} exited with status {procs[failed].returncode}; stopped the others.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
