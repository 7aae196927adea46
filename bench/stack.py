"""The real stack on 127.0.0.1 for the load and fault benchmarks (bench/load.py, bench/faults.py) and their short
forms in the tests (tests/proofs/): gunicorn (gunicorn.conf.py, threaded workers), Celery workers and beat, on a
PostgreSQL database and a Redis given by URL, with the zero-latency scripted model (fakes/llm.py) and the business's
HTTPS API (fakes/upstream.py) each in its own process.

Every process is started in its own session and stopped on exit (bench/env.py's `Processes`). Worker, beat
and web logs go to `log_dir`; `Stack.log_errors()` lists the lines that say ERROR or Traceback.

    stack = Stack(database_url=…, redis_url=…, tmp=Path(…), log_dir=Path(…), scripts={…})
    stack.start()            # fakes, web, workers (and beat when asked)
    stack.base_url           # http://127.0.0.1:<port>
    stack.kill_worker(0)     # SIGKILL the whole process group of worker 0 (it dies mid-task)
    stack.start_worker(0)    # and a new one in its place
    stack.deliveries()       # {webhook-id: [[unix time, path], …]} as the business API received them
    stack.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from env import Processes, cleanup_redis, django_environment, ready_line, wait_ready, worker_command


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Stack:
    def __init__(
        self,
        *,
        database_url: str,
        redis_url: str,
        tmp: Path,
        log_dir: Path,
        scripts: dict[str, list[dict[str, Any]]],
        workers: int = 1,
        concurrency: int = 2,
        web_processes: int = 2,
        web_threads: int = 8,
        beat: bool = False,
        settings: dict[str, str] | None = None,
        llm_base: str | None = None,
    ) -> None:
        self.database_url, self.redis_url = database_url, redis_url
        self.tmp, self.log_dir = tmp, log_dir
        self.scripts = scripts
        self.worker_count, self.concurrency = workers, concurrency
        self.web_processes, self.web_threads = web_processes, web_threads
        self.beat = beat
        self.settings = dict(settings or {})
        self.llm_base = llm_base  # a model of the caller's (e.g. a FakeLLM in its process) instead of fakes.llm's
        self.processes = Processes()
        self.queue = f"bench-{uuid.uuid4().hex[:10]}"
        self.workers: dict[int, subprocess.Popen[Any]] = {}
        self.worker_logs: dict[int, Path] = {}
        self.web: subprocess.Popen[Any] | None = None
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env: dict[str, str] = {}
        self.ca_file: Path | None = None
        self.upstream_host = ""
        self._starts = 0

    # --- starting and stopping -------------------------------------------------------------------------------------

    def start(self) -> Stack:
        from fakes import upstream

        self.log_dir.mkdir(parents=True, exist_ok=True)
        for old in self.log_dir.glob("*.log"):
            old.unlink()
        certs = self.tmp / "certs"
        self.ca_file = upstream.write_certs(certs, "tools.test", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        up = self.processes.start(
            [sys.executable, "-m", "fakes.upstream", "--port", "8443", "--cert-dir", str(certs)], env=env
        )
        self.upstream_host, upstream_port = ready_line(up, "the TLS upstream")[1:3]
        self.upstream_origin = f"https://tools.test:{upstream_port}"
        if self.llm_base is None:
            scripts = self.tmp / "scripts.json"
            scripts.write_text(json.dumps(self.scripts))
            llm = self.processes.start(
                [sys.executable, "-m", "fakes.llm", "--port", "0", "--scripts", str(scripts)], env=env
            )
            llm_base = ready_line(llm, "the fake model")[1]
        else:
            llm_base = self.llm_base
        self.env = {
            **os.environ,
            **django_environment(self.database_url, self.redis_url, self.tmp),
            "KAGENT_CELERY_QUEUE": self.queue,
            "KAGENT_LLM_BASE_URL": llm_base,
            "KAGENT_OPERATOR_MODELS": "script:*",  # the scripted model's names
            "KAGENT_LLM_API_KEY": "fake-operator-key",
            "KAGENT_LLM_MODEL": "fake-model",
            "KAGENT_EGRESS_ALLOW_NETWORKS": f"{self.upstream_host}/32",
            "KAGENT_EGRESS_CA_BUNDLE": str(self.ca_file),
            "KAGENT_EGRESS_RESOLVE": f"tools.test:{upstream_port}:{self.upstream_host}",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "KAGENT_HTTPS": "false",
            # One simulated app makes every request: the request limits are not what is measured.
            "KAGENT_API_RATE_SECRET": "1000000",
            "KAGENT_API_RATE_PUBLISHABLE": "1000000",
            "KAGENT_RUN_RATE_PUBLISHABLE": "1000000",
            "KAGENT_BIND": f"127.0.0.1:{self.port}",
            "WEB_CONCURRENCY": str(self.web_processes),
            "WEB_THREADS": str(self.web_threads),
            "PYTHONUNBUFFERED": "1",
            **self.settings,
        }
        self.env.pop("DJANGO_SETTINGS_MODULE", None)
        self.start_web()
        for index in range(self.worker_count):
            self.start_worker(index)
        if self.beat:
            schedule = self.tmp / "beat-schedule"
            self.processes.start(
                [sys.executable, "-m", "celery", "-A", "kagent", "beat", "-l", "warning", "-s", str(schedule)],
                env=self.env,
                log=self.log_dir / "beat.log",
            )
        return self

    def start_web(self) -> None:
        log = self.log_dir / "web.log"
        self.web = self.processes.start(
            [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "kagent.wsgi"],
            env=self.env,
            log=log,
        )
        import httpx

        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=2).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            if self.web.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"gunicorn did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)

    def start_worker(self, index: int, *, wait: bool = True) -> subprocess.Popen[Any]:
        self._starts += 1
        log = self.log_dir / f"worker-{index}-{self._starts}.log"
        name = f"{self.queue}-{index}-{self._starts}@{socket.gethostname()}"
        # Threads, as docker-compose.yml's worker.
        command = worker_command(self.queue, name, pool="threads", concurrency=self.concurrency)
        proc = self.processes.start(command, env=self.env, log=log)
        self.workers[index] = proc
        self.worker_logs[index] = log
        if wait:
            wait_ready(proc, log)
        return proc

    def worker_ready(self, index: int) -> bool:
        log = self.worker_logs.get(index)
        return index in self.workers and log is not None and "ready." in log.read_text(errors="replace")

    def kill_worker(self, index: int) -> None:
        """SIGKILL the worker's whole process group: the main process and its pool children die mid-task."""
        proc = self.workers.pop(index)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        self.processes.stop_all()
        cleanup_redis(self.redis_url, self.queue)

    # --- what happened ------------------------------------------------------------------------------------------

    def deliveries(self) -> dict[str, list[list[Any]]]:
        """Every request the business API received, by `webhook-id`."""
        import httpx

        assert self.ca_file is not None
        context = ssl.create_default_context(cafile=str(self.ca_file))
        port = self.upstream_origin.rsplit(":", 1)[1]
        with httpx.Client(verify=context) as client:
            # The certificate names tools.test; the fake listens on its own loopback address.
            response = client.get(f"https://{self.upstream_host}:{port}/ledger", timeout=10)
        data: dict[str, list[list[Any]]] = response.json()["deliveries"]
        return data

    def log_errors(self) -> list[str]:
        lines: list[str] = []
        for log in sorted(self.log_dir.glob("*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if " ERROR " in line or line.startswith("Traceback"):
                    lines.append(f"{log.name}: {line[:300]}")
        return lines
