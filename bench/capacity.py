"""Capacity: runs in flight on one worker while the model takes its time, one command.

    .venv/bin/python bench/capacity.py                                # 200 runs, a model answering after 1 s
    .venv/bin/python bench/capacity.py --runs 1000 --concurrency 1000 # the moonshot
    .venv/bin/python bench/capacity.py --pool prefork --concurrency 4 # the worker as it was (one run a process)

Every run is the shape of bench/runs_bench.py: a one-shot `POST /v1/runs` on a published agent whose model (the
scripted fake of fakes/llm.py, in its own process, answering each request after `--latency-ms`) asks for the HTTP tool
`order_status` in round 1 (a signed GET through the hardened client to the TLS upstream of fakes/upstream.py) and
answers text in round 2: two model calls, so two latencies of waiting per run. All runs are submitted at once (API
threads in this process, Django's test client against the real WSGI stack), then one worker consumes them: the
command of `docker-compose.yml`'s `worker` service, read from that file, with its `${VAR:-default}` defaults
(`--pool` and `--concurrency` replace its own when given).

Printed: the wall time from the first submission to the last run's `completed_at`; how many runs were in flight at
once at most (claimed, not ended: sampled every 50 ms); every run's status; the worker's memory (PSS of its
processes, /proc/<pid>/smaps_rollup) idle and at its peak, and the difference per run in flight; the database
connections the worker held at most (pg_stat_activity, sampled); the worker's CPU per run. Nothing asserts a time.
PostgreSQL and Redis: `--database-url` / `--redis-url`, or throwaway embedded servers (kagent/embedded.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from env import (
    ROOT,
    Processes,
    cleanup_redis,
    django_environment,
    drop_database,
    ready_line,
    recreate_database,
    servers,
    setup_django,
    wait_ready,
    worker_options,
)
from runs_bench import ORDER, SCRIPT, SCRIPTS, TOOL

LOG_DIR = ROOT / "var" / "bench-capacity"
WORKER_APP = "kagent-bench-capacity-worker"  # the worker's connections, as PostgreSQL names them (PGAPPNAME)


def compose_worker_command() -> list[str]:
    """`docker-compose.yml`'s worker command, its `${VAR:-default}`s read from the environment or their defaults.
    Not env.worker_command's: what this benchmark measures is the worker as compose starts it (its pool, its
    concurrency and any option it adds), so it follows the file."""
    import yaml

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    command = compose["services"]["worker"]["command"]
    # linear: a literal "${", then classes of bounded characters
    pattern = re.compile(r"\$\{([A-Z_]+):-([^}]*)\}")
    return [pattern.sub(lambda m: os.environ.get(m.group(1), m.group(2)), part) for part in command]


def with_option(command: list[str], option: str, value: str | None) -> list[str]:
    if value is None:
        return command
    out, skip = [], False
    for i, part in enumerate(command):
        if skip:
            skip = False
            continue
        if part == option:
            skip = i + 1 < len(command)
            continue
        if part.startswith(option + "="):
            continue
        out.append(part)
    return [*out, option, value]


def group_pss_kb(pgid: int) -> int:
    """The proportional memory of every process of a process group (shared pages counted once in all)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) != pgid:
                continue
            for line in Path(f"/proc/{entry}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total


def group_cpu_s(pgid: int) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) != pgid:
                continue
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, ValueError, IndexError):
            continue
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=1000.0, help="the model's time to answer each request")
    parser.add_argument("--pool", default=None, help="the worker's --pool (default: docker-compose.yml's)")
    parser.add_argument("--concurrency", default=None, help="the worker's --concurrency (default: compose's)")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--submit-first",
        action="store_true",
        help="queue every run before the worker consumes any (the time then counts from then): in flight is then "
        "bounded by the worker alone, not by how fast this process submits",
    )
    parser.add_argument("--database-url", default="", help="default: a throwaway embedded PostgreSQL")
    parser.add_argument("--redis-url", default="", help="default: a throwaway embedded Redis")
    args = parser.parse_args()

    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, terminate)
    processes = Processes()
    queue = f"bench-capacity-{uuid.uuid4().hex[:10]}"
    up = contextlib.ExitStack()
    try:
        args.database_url, args.redis_url = up.enter_context(
            servers(args.database_url, args.redis_url, "kagent_bench_capacity")
        )
        with tempfile.TemporaryDirectory() as tmp_name:
            _capacity(args, processes, Path(tmp_name), queue)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        processes.stop_all()
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        with contextlib.suppress(Exception):
            drop_database(args.database_url)
        cleanup_redis(args.redis_url, queue)
        up.close()


def _capacity(args: argparse.Namespace, processes: Processes, tmp: Path, queue: str) -> None:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    from fakes import upstream

    ca_file = upstream.write_certs(tmp / "certs", "tools.test", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    up = processes.start([sys.executable, "-m", "fakes.upstream", "--cert-dir", str(tmp / "certs")], env=env)
    host = ready_line(up, "the TLS upstream")[1]
    scripts = tmp / "scripts.json"
    scripts.write_text(json.dumps(SCRIPTS))
    llm_argv = [sys.executable, "-m", "fakes.llm", "--port", "0", "--scripts", str(scripts)]
    llm = processes.start([*llm_argv, "--latency-ms", str(args.latency_ms)], env=env)
    llm_base = ready_line(llm, "the fake model")[1]

    recreate_database(args.database_url)
    bench_env = {
        **django_environment(args.database_url, args.redis_url, tmp),
        "KAGENT_CELERY_QUEUE": queue,
        "KAGENT_LLM_BASE_URL": llm_base,
        "KAGENT_OPERATOR_MODELS": "script:*",  # the scripted model's names
        "KAGENT_LLM_API_KEY": "fake-operator-key",
        "KAGENT_LLM_TIMEOUT_S": str(max(10.0, args.latency_ms / 1000 * 4)),
        "KAGENT_EGRESS_ALLOW_NETWORKS": f"{host}/32",
        "KAGENT_EGRESS_CA_BUNDLE": str(ca_file),
        "KAGENT_EGRESS_RESOLVE": f"tools.test:8443:{host}",
        "PYTHONUNBUFFERED": "1",
    }
    os.environ["ALLOWED_HOSTS"] = "testserver,localhost,127.0.0.1"
    setup_django(bench_env)
    from django.db import connection
    from django.db.models import Max, Min
    from django.test import Client

    from kagent.models import ApiKey, Organization, Project
    from kagent.services import api_key_create
    from runs.models import Run

    organization = Organization.objects.create(name="bench org")
    project = Project.objects.create(organization=organization, name="bench", api_rate_secret=1_000_000)
    _, secret_key = api_key_create(project=project, kind=ApiKey.Kind.SECRET, name="bench")

    def post(path: str, body: dict[str, Any], expect: int, **extra: str) -> dict[str, Any]:
        response = Client(HTTP_AUTHORIZATION=f"Bearer {secret_key}").post(
            path, json.dumps(body), content_type="application/json", **extra
        )
        if response.status_code != expect:
            raise SystemExit(f"POST {path} answered {response.status_code}: {response.content[:500]!r}")
        data: dict[str, Any] = response.json()
        return data

    post("/v1/tools", TOOL, 201)
    config = {
        "instructions": "You help customers of an online shop with their orders.",
        "model": {"provider": "openai_compatible", "name": f"script:{SCRIPT}"},
        "tools": {"http": [{"tool": "order_status", "rules": "Only for the customer's own order."}]},
    }
    agent_id = post("/v1/agents", {"name": "bench", "config": config}, 201)["id"]
    post(f"/v1/agents/{agent_id}/publish", {}, 201)

    def start_worker() -> Any:
        command = compose_worker_command()
        command = with_option(command, "--pool", args.pool)
        command = with_option(command, "--concurrency", args.concurrency)
        argv = [sys.executable, "-m", *command] if command[0] == "celery" else command
        # With --submit-first it listens to an empty queue of its own until the runs are queued (add_consumer below).
        listen = f"{queue}-idle" if args.submit_first else queue
        argv += worker_options(listen, worker_name)
        worker = processes.start(argv, env={**os.environ, "PGAPPNAME": WORKER_APP}, log=log)
        wait_ready(worker, log)
        print(f"worker: {shlex.join(command)}  (pid {worker.pid})", flush=True)
        return worker

    log = LOG_DIR / "worker.log"
    log.write_text("")
    worker_name = f"{queue}@{socket.gethostname()}"
    worker = start_worker()
    time.sleep(1.0)
    idle_kb = group_pss_kb(worker.pid)
    cpu_before = group_cpu_s(worker.pid)

    in_flight_max, pss_peak_kb, connections_max = 0, idle_kb, 0
    done = threading.Event()

    def sample() -> None:
        nonlocal in_flight_max, pss_peak_kb, connections_max
        while not done.is_set():
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM runs_run WHERE status = 'in_progress'")
                in_flight_max = max(in_flight_max, cursor.fetchone()[0])
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [WORKER_APP])
                connections_max = max(connections_max, cursor.fetchone()[0])
            pss_peak_kb = max(pss_peak_kb, group_pss_kb(worker.pid))
            time.sleep(0.05)
        connection.close()

    customers = iter(range(1, 10**9))
    lock = threading.Lock()

    def submit(_: int) -> str:
        with lock:
            n = next(customers)
        address = f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"
        body = {"agent": agent_id, "input": f"Where is my order {ORDER}?"}
        try:
            return str(post("/v1/runs", body, 201, REMOTE_ADDR=address)["id"])
        finally:
            connection.close()

    started = time.time()
    with ThreadPoolExecutor(max_workers=4) as pool:
        ids = list(pool.map(submit, range(args.runs)))
    submitted = time.time() - started
    if args.submit_first:
        from kagent.celery import app as celery_app

        replies = celery_app.control.broadcast(
            "add_consumer", arguments={"queue": queue}, destination=[worker_name], reply=True, timeout=10
        )
        if not replies:
            raise SystemExit("the worker did not answer add_consumer")
        started = time.time()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    wait_until = time.monotonic() + args.timeout
    while Run.objects.filter(pk__in=ids).exclude(status__in=Run.TERMINAL).exists():
        if time.monotonic() > wait_until:
            break
        time.sleep(0.1)
    done.set()
    sampler.join(timeout=10)
    cpu_s = group_cpu_s(worker.pid) - cpu_before
    runs = Run.objects.filter(pk__in=ids)
    ends = runs.aggregate(first_claim=Min("started_at"), last_end=Max("completed_at"))
    statuses: dict[str, int] = {}
    for status in runs.values_list("status", flat=True):
        statuses[status] = statuses.get(status, 0) + 1
    wall = (ends["last_end"].timestamp() - started) if ends["last_end"] else float("nan")
    waiting = 2 * args.latency_ms / 1000
    print(f"runs: {args.runs}, the model answering after {args.latency_ms:.0f} ms ({waiting:.1f} s of waiting a run)")
    print(f"submitted in {submitted:.2f} s; statuses {statuses}")
    since = "the worker began to consume them" if args.submit_first else "the first submission"
    print(f"all done {wall:.2f} s after {since} (one run alone: about {waiting:.1f} s)")
    print(f"runs in flight at once, at most: {in_flight_max}")
    print(f"database connections of the worker, at most: {connections_max}")
    per_run = (pss_peak_kb - idle_kb) / max(1, in_flight_max)
    print(
        f"worker memory (PSS): idle {idle_kb / 1024:.1f} MB, peak {pss_peak_kb / 1024:.1f} MB: "
        f"{per_run / 1024:.2f} MB a run in flight"
    )
    print(f"worker CPU: {cpu_s:.2f} s, {cpu_s / max(1, args.runs) * 1000:.1f} ms a run")
    errors = [line for line in log.read_text(errors="replace").splitlines() if re.search(r"ERROR|Traceback", line)]
    print(f"worker log ({log}): {len(errors)} error lines")
    for line in errors[:10]:
        print("   ", line[:300])


if __name__ == "__main__":
    main()
