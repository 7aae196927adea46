"""Benchmark: runs end to end (API + Celery + PostgreSQL) against a bare httpx loop making the same calls, same run.

    .venv/bin/python bench/runs_bench.py [--runs 200] [--reps 3] [--database-url postgres://…/kagent_bench_runs]
    .venv/bin/python bench/runs_bench.py --quick      # a smoke run, well under a minute of measuring

Every run is a one-shot `POST /v1/runs` on a published agent with one granted HTTP tool (`order_status`, created
through `POST /v1/tools`: GET https://tools.test:8443/bench?order={{args.order_number}}, response shaping). The
scripted fake model (fakes/llm.py, its own process, zero latency, nothing recorded) asks for `order_status`
in round 1 and answers text in round 2. The upstream is the loopback TLS server of fakes/upstream.py (its own
process, `trustme` certificate), reached through the hardened client (test-only egress settings). Runs are
submitted with Django's test `Client`, in this process, against the real WSGI stack (middleware, DRF, auth): no
HTTP server in between. They execute in a real `celery worker` (prefork, concurrency 2) on Redis and a PostgreSQL
database this script drops and creates fresh each time (`--database-url`, whose name must contain "bench", and
`--redis-url`; without them, throwaway embedded servers of kagent/embedded.py, PostgreSQL 18 on a unix socket);
nothing else is touched. Celery beat (the sweeper) does not run.

(a) runs/s of the engine, DIVIDED BY runs/s of a bare loop: per run, POST to the fake model, GET to the TLS
    upstream, POST to the fake model, with httpx and nothing else (no database, no queue, no signing). The model
    request bodies are the exact bytes the engine sent in (b). Both sides: the same number of runs, 2 at a time
    (2 API threads feeding 2 worker processes; 2 threads each with its own keep-alive httpx client). Engine time:
    from the first submission to the last run's `completed_at`. Reps alternate engine, baseline; the median ratio
    is printed. Target >= 0.3. Also printed: CPU ms per run of each process group (from /proc: this process, the
    worker and its children, every PostgreSQL process including exited backends, redis, the two servers), so the
    ratio can be explained.
(b) SQL queries of one run from API to completion, counted in this process with CaptureQueriesContext: around the
    POST /v1/runs request, and around `runs.engine.run_execute(run_id)` run here (not in the worker). Measured
    after one warm-up run (the once-a-minute `last_used_at` write and the first-use signing secret are not in it).
    Django logs BEGIN and COMMIT as statements: they are round trips and are counted (and shown apart). Broken
    down by phase (markers around run_create, the model calls and the HTTP tool call) and by statement shape;
    `--sql` prints every statement. Target <= 10. Where the server loads pg_stat_statements, the runs timed one at a
    time after it are also counted in PostgreSQL's own statistics (top-level statements, as seen from outside).
    `--profile N` adds a cProfile (CPU time) of N runs here.
(c) ms per run with 10, 100 and 1,000 runs queued at once: submit all while nothing consumes the queue, then let a
    worker take them, until all complete; time from the first claim (`started_at`) to the last `completed_at`.
    Twice: with the worker of (a) still running (warm; `cancel_consumer` / `add_consumer`), and with a fresh worker
    process started after the submissions (cold: each pool child's first run pays for its connections and lazy
    imports, a few hundred ms, which weighs on the small sizes). Sizes below 100 are repeated three times and the
    median taken. The ratio largest/smallest should stay near 1; for batches of 100 or more the time per run in
    each tenth of the batch is printed (rising numbers would mean runs slow down as the tables grow).

Nothing here asserts a time: it prints numbers and ratios. Worker logs go to var/bench-runs/ and are scanned for
errors at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import os
import re
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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
    worker_command,
)

LOG_DIR = ROOT / "var" / "bench-runs"
STOPPING = threading.Event()
SCRIPT = "bench"
ORDER = "8812"
ANSWER = f"Order {ORDER} has shipped and should arrive on 2 January."
TOOL = {
    "name": "order_status",
    "description": "Look up the status of an order by its number.",
    "effect": "read",
    "requires_verified_user": False,
    "config": {
        "method": "GET",
        "url": "https://tools.test:8443/bench?order={{args.order_number}}",
        "parameters": {
            "type": "object",
            "properties": {"order_number": {"type": "string", "description": "The order number, e.g. 8812"}},
            "required": ["order_number"],
            "additionalProperties": False,
        },
        "response": {
            "items_path": "data",
            "fields": [{"path": "status", "label": "Status"}, {"path": "eta", "label": "Expected delivery"}],
            "max_items": 1,
            "empty_message": "No order with that number.",
        },
        "timeout_ms": 5000,
    },
}
SCRIPTS = {
    SCRIPT: [
        {"tool_calls": [{"name": "order_status", "arguments": {"order_number": ORDER}}]},
        {"text": ANSWER},
    ]
}


# --- SQL statement shapes -----------------------------------------------------------------------------------------

_IDENT = re.compile(r'"(?:[a-z0-9_]+)"\."([a-z0-9_]+)"')


def sql_shape(sql: str) -> str:
    """A short, literal-free form of a statement: `UPDATE runs_run SET a, b WHERE id = ? AND status = ?`."""
    s = re.sub(r"'(?:[^']|'')*'", "?", sql)
    s = re.sub(r"\b\d+(?:\.\d+)?\b", "?", s)
    s = _IDENT.sub(r"\1", s).replace('"', "")
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\((?:\?|%s)(?:, ?(?:\?|%s))+\)", "(…)", s)
    s = re.sub(
        r"SAVEPOINT \S+|RELEASE SAVEPOINT \S+|ROLLBACK TO SAVEPOINT \S+", lambda m: m.group(0).rsplit(" ", 1)[0], s
    )
    m = re.match(r"SELECT (.*?) FROM (\S+)(.*)", s)
    if m:
        rest = m.group(3)
        joins = re.findall(r"JOIN (\S+)", rest)
        where = re.search(r" WHERE (.*?)(?: ORDER BY | LIMIT | FOR UPDATE|$)", rest)
        tail = "".join(f" {k}" for k in ("ORDER BY", "LIMIT", "FOR UPDATE") if k in rest)
        head = "SELECT COUNT" if m.group(1).startswith("COUNT(") else "SELECT"
        if m.group(1).startswith("? AS a"):
            head = "SELECT EXISTS"
        return (
            f"{head} {m.group(2)}{''.join(f' ⋈ {j}' for j in joins)}"
            + (f" WHERE {where.group(1)}" if where else "")
            + tail
        )
    m = re.match(r"UPDATE (\S+) SET (.*?) WHERE (.*)", s)
    if m:
        columns = re.findall(r"(?:^|, )(\w+) = ", m.group(2))
        return f"UPDATE {m.group(1)} SET {', '.join(columns)} WHERE {m.group(3)}"
    m = re.match(r"INSERT INTO (\S+)", s)
    if m:
        return f"INSERT INTO {m.group(1)}"
    return s[:140]


_THIS_DATABASE = "(SELECT oid FROM pg_database WHERE datname = current_database())"


def _postgres_statements_start() -> str:
    """Starts PostgreSQL's own count of this database's statements (pg_stat_statements, top-level statements: what
    an outside observer counts, foreign-key checks deferred to COMMIT included): "" when started, else why not (the
    server doesn't load the module, or this role may not read the setting, create the extension or reset its
    statistics: each needs a privilege a role that is not a superuser may lack)."""
    from django.db import DatabaseError, connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('shared_preload_libraries')")
            if "pg_stat_statements" not in cursor.fetchone()[0]:
                return "pg_stat_statements is not loaded by this server"
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            cursor.execute(f"SELECT pg_stat_statements_reset(0, {_THIS_DATABASE}, 0)")
    except DatabaseError as exc:
        return str(exc).strip().splitlines()[0]
    return ""


def _postgres_statements() -> int:
    """The statements PostgreSQL counted in this database since `_postgres_statements_start`, but for its own."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COALESCE(SUM(calls), 0) FROM pg_stat_statements WHERE dbid = {_THIS_DATABASE} AND toplevel "
            "AND query NOT LIKE '%%pg_stat_statements%%'"
        )
        return int(cursor.fetchone()[0])


class Phases:
    """Marks inside a CaptureQueriesContext: which queries ran between two points of the code."""

    def __init__(self) -> None:
        self.ctx: Any = None
        self.marks: list[tuple[str, int]] = []

    def mark(self, label: str) -> None:
        if self.ctx is not None:
            self.marks.append((label, len(self.ctx.captured_queries)))

    @contextlib.contextmanager
    def capture(self) -> Iterator[Any]:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        self.marks = []
        with CaptureQueriesContext(connection) as ctx:
            self.ctx = ctx
            try:
                yield ctx
            finally:
                self.ctx = None

    def split(
        self, queries: list[dict[str, Any]], names: Callable[[str | None, str | None], str]
    ) -> list[tuple[str, list[str]]]:
        """(phase name, its statements) for the spans between marks; `names(previous mark, next mark)`."""
        bounds = [(None, 0)] + list(self.marks) + [(None, len(queries))]
        out = []
        for (label_a, start), (label_b, end) in zip(bounds, bounds[1:], strict=False):
            out.append((names(label_a, label_b), [q["sql"] for q in queries[start:end]]))
        return out


def _engine_phase(before: str | None, after: str | None) -> str:
    if before is None:
        return "claim, load, prompt" if after else "the whole engine"
    if after is None:
        return f"after {before.split(':')[0].replace('model', 'model call ')}: answer, complete"
    kind_b, edge_b = before.split(":")
    kind_a, edge_a = after.split(":")
    if edge_b == "start":
        return f"inside {kind_b.replace('model', 'model call ')}" + (
            " (secrets, signing, egress log)" if kind_b == "http" else ""
        )
    what = {"http": "HTTP tool call"}.get(kind_a, kind_a.replace("model", "model call "))
    return f"{kind_b.replace('model', 'model call ').replace('http', 'HTTP tool')} -> {what}: " + (
        "model step, round, policy check" if kind_a == "http" else "tool result, transcript"
    )


CpuGroups = dict[str, Callable[[int, int, str], bool]]


class PostgresPids:
    """Which PostgreSQL processes are this benchmark's: the backends (and autovacuum workers) of its database, and
    the server's shared writers (WAL writer, checkpointer, background writer), whose work our writes cause too.
    Other databases' backends on the same server (another test suite running) are left out, and so is the time of
    backends that exited (the postmaster's, which can't be told apart): the benchmark's connections persist."""

    SHARED = ("walwriter", "checkpointer", "background writer")

    def __init__(self, database_url: str) -> None:
        parts = urlsplit(database_url)
        self.name = parts.path.lstrip("/")
        self.admin = urlunsplit(parts._replace(path="/postgres"))
        self.pids: set[int] = set()

    def refresh(self) -> None:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s OR backend_type = ANY(%s)",
                (self.name, list(self.SHARED)),
            ).fetchall()
        self.pids = {row[0] for row in rows}


def _cpu_sample(groups: CpuGroups, postgres: PostgresPids | None = None) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each group of processes, read from /proc."""
    if postgres is not None:
        postgres.refresh()
    tick = os.sysconf("SC_CLK_TCK")
    out = dict.fromkeys(groups, 0.0)
    cpu = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    machine = (sum(cpu) - cpu[3] - cpu[4]) / tick  # everything but idle and iowait
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        pgrp, used = int(fields[2]), (int(fields[11]) + int(fields[12])) / tick
        for name, member in groups.items():
            if member(int(entry), pgrp, comm):
                out[name] += used
                break
    out["not attributed"] = machine - sum(out.values())
    return out


def _cpu_per_run(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    out = {name: (after[name] - before[name]) * 1000 / n for name in before}
    out["total"] = sum(value for name, value in out.items() if name != "not attributed")
    return out


def _profile(n: int, one_run: Callable[[], None]) -> None:
    """`--profile N`: N runs one after another in this process (API, then run_execute), under cProfile."""
    import cProfile
    import pstats

    one_run()
    profiler = cProfile.Profile(time.process_time)  # CPU time: waiting on the database or a socket is not in it
    start = time.perf_counter()
    profiler.enable()
    for _ in range(n):
        one_run()
    profiler.disable()
    elapsed = time.perf_counter() - start
    print()
    print(
        f"profile: {n} runs in this process, one at a time, {elapsed / n * 1000:.1f} ms/run under cProfile (CPU time)"
    )
    stats = pstats.Stats(profiler)
    stats.dump_stats(str(ROOT / "var" / "bench-runs" / "profile.pstats"))  # for pstats/snakeviz: callers, callees
    parts = r"kagent/|runs/|guard/|tools/|agents/|django/db/backends|httpx|jsonschema"
    stats.sort_stats("cumulative").print_stats(parts, 40)
    stats.sort_stats("tottime").print_stats(25)


# Where a run's CPU goes, inclusive (a part's figure contains the parts called inside it): (module, attribute).
CPU_PARTS = (
    ("rest_framework.views", "APIView.dispatch"),
    ("kagent.auth", "api_key_from_header"),
    ("kagent.throttle", "api_request"),
    ("runs.services", "run_create"),
    ("runs.creation", "latest_version"),
    ("runs.creation", "insert_run"),
    ("kagent.broker", "send"),
    ("runs.engine", "run_execute"),
    ("runs.store", "claim"),
    ("llm.providers", "complete"),
    ("llm.openai_compatible", "operator_post"),
    ("runs.store", "record_round"),
    ("runs.engine.decisions", "policy_check"),
    ("runs.engine.calls", "http_tool_call"),
    ("kagent.egress.client", "EgressClient.request"),
    ("runs.store", "record_result"),
    ("guard", "check"),
    ("runs.store", "complete"),
    ("runs.run_events", "publish"),
    ("runs.store", "execute"),
)


def _cpu_split(n: int, one_run: Callable[[], None]) -> None:
    """`--cpu-split N`: N runs one after another in this process, with the CPU time (time.process_time) spent in
    each of CPU_PARTS, per run. Unlike a profiler it adds almost nothing to what it measures."""
    import importlib

    from django.db import connection

    spent: dict[str, float] = {}
    backend: dict[str, float] = {}
    calls: dict[str, int] = {}
    originals: list[tuple[Any, str, Any]] = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        stat = Path(f"/proc/{cursor.fetchone()[0]}/stat")
    tick = os.sysconf("SC_CLK_TCK")

    def backend_cpu() -> float:
        """This process's PostgreSQL backend's CPU seconds (clock ticks: summed over many calls, unbiased)."""
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    def timed(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start, start_backend = time.process_time(), backend_cpu()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - start
                backend[name] = backend.get(name, 0.0) + backend_cpu() - start_backend
                calls[name] = calls.get(name, 0) + 1

        return wrapper

    for module_name, attribute in CPU_PARTS:
        owner: Any = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = vars(owner)[name]
        originals.append((owner, name, original))
        setattr(owner, name, timed(f"{module_name}.{attribute}", original))
    one_run()
    spent.clear()
    backend.clear()
    calls.clear()
    collected: dict[int, list[float]] = {0: [], 1: [], 2: []}  # the collector's passes by generation: CPU seconds
    collecting: list[float] = []

    def collector(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[:] = [time.process_time()]
        elif collecting:
            collected[info["generation"]].append(time.process_time() - collecting[0])

    gc.callbacks.append(collector)
    start, start_backend = time.process_time(), backend_cpu()
    try:
        for _ in range(n):
            one_run()
    finally:
        gc.callbacks.remove(collector)
        for owner, name, original in originals:
            setattr(owner, name, original)
    total, total_backend = time.process_time() - start, backend_cpu() - start_backend
    print()
    print(
        f"CPU split: {n} runs in this process, one at a time: {total / n * 1000:.2f} ms CPU per run here, "
        f"{total_backend / n * 1000:.2f} ms in its PostgreSQL backend (per run, inclusive)"
    )
    passes = (f"generation {g}: {len(t)} passes, {sum(t) / n * 1000:.3f} ms per run" for g, t in collected.items())
    print(f"    garbage collector: {', '.join(passes)}")
    print("       here   backend  calls")
    for module_name, attribute in CPU_PARTS:
        key = f"{module_name}.{attribute}"
        if key in spent:
            print(f"    {spent[key] / n * 1000:7.3f} {backend[key] / n * 1000:7.3f} {calls[key] / n:6.1f}  {key}")


# --- main ---------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help="runs per side per repetition in (a) (default 200)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions of (a) (default 5)")
    parser.add_argument("--sizes", default=None, help="queue sizes for (c), comma-separated (default 10,100,1000)")
    parser.add_argument(
        "--database-url",
        default="",
        help="PostgreSQL database to DROP and create (its name must contain 'bench'); default: an embedded throwaway",
    )
    parser.add_argument("--redis-url", default="", help="default: an embedded throwaway Redis")
    parser.add_argument("--quick", action="store_true", help="a smoke run: --runs 30 --reps 1 --sizes 10,100")
    parser.add_argument("--sql", action="store_true", help="print every statement of (b), by phase")
    parser.add_argument(
        "--cpu-split",
        type=int,
        default=0,
        metavar="N",
        help="also time N runs in this process and print the CPU spent in each part of the run",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also profile N runs in this process (API + run_execute) with cProfile",
    )
    parser.add_argument("--keep-db", action="store_true", help="leave the benchmark database for inspection")
    parser.add_argument(
        "--http",
        action="store_true",
        help="(a) submits over HTTP to gunicorn (gunicorn.conf.py) instead of through Django's test client",
    )
    parser.add_argument(
        "--concurrency", type=int, default=2, help="the Celery worker's pool size (default 2, one per core here)"
    )
    parser.add_argument(
        "--pool", default="prefork", choices=["prefork", "threads"], help="the worker's pool (default prefork)"
    )
    args = parser.parse_args()
    runs = args.runs or (30 if args.quick else 200)
    reps = args.reps or (1 if args.quick else 5)
    sizes = [int(s) for s in (args.sizes or ("10,100" if args.quick else "10,100,1000")).split(",")]
    if args.database_url and not args.database_url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("--database-url must be a PostgreSQL URL")

    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    # Ctrl-C stops it even when started in the background by a shell, which would leave SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    processes = Processes()
    queue = f"bench-runs-{uuid.uuid4().hex[:10]}"
    servers_up = contextlib.ExitStack()
    try:
        args.database_url, args.redis_url = servers_up.enter_context(
            servers(args.database_url, args.redis_url, "kagent_bench_runs")
        )
        with tempfile.TemporaryDirectory() as tmp_name:
            _bench(args, runs, reps, sizes, processes, Path(tmp_name), queue)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping the worker and servers", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        STOPPING.set()  # the API threads stop submitting
        processes.stop_all()
        if not args.keep_db:
            with contextlib.suppress(Exception):
                from django.db import connections

                connections.close_all()
            with contextlib.suppress(Exception):
                drop_database(args.database_url)
        cleanup_redis(args.redis_url, queue)
        servers_up.close()


def _bench(
    args: argparse.Namespace, runs: int, reps: int, sizes: list[int], processes: Processes, tmp: Path, queue: str
) -> None:
    started_all = time.monotonic()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    for old in LOG_DIR.glob("worker-*.log"):
        old.unlink()

    # --- servers: TLS upstream and the fake model, each in its own process ---
    from fakes import upstream

    ca_file = upstream.write_certs(tmp / "certs", "tools.test", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    up = processes.start([sys.executable, "-m", "fakes.upstream", "--cert-dir", str(tmp / "certs")], env=env)
    host = ready_line(up, "the TLS upstream")[1]
    scripts = tmp / "scripts.json"
    scripts.write_text(json.dumps(SCRIPTS))
    llm = processes.start([sys.executable, "-m", "fakes.llm", "--port", "0", "--scripts", str(scripts)], env=env)
    llm_base = ready_line(llm, "the fake model")[1]

    # --- this process: Django on the fresh database ---
    recreate_database(args.database_url)
    bench_env = {
        **django_environment(args.database_url, args.redis_url, tmp),
        "KAGENT_CELERY_QUEUE": queue,
        "KAGENT_LLM_BASE_URL": llm_base,
        "KAGENT_OPERATOR_MODELS": "script:*",  # the scripted model's names
        "KAGENT_LLM_API_KEY": "fake-operator-key",
        "KAGENT_EGRESS_ALLOW_NETWORKS": f"{host}/32",
        "KAGENT_EGRESS_CA_BUNDLE": str(ca_file),
        "KAGENT_EGRESS_RESOLVE": f"tools.test:8443:{host}",
        "PYTHONUNBUFFERED": "1",
    }
    os.environ["ALLOWED_HOSTS"] = "testserver,localhost,127.0.0.1"  # the test Client's host; this process only
    migrated = setup_django(bench_env)
    print(
        f"database {urlsplit(args.database_url).path.lstrip('/')} created and migrated "
        f"in {migrated:.1f}s; queue {queue}; upstream {host}:8443; model {llm_base}",
        flush=True,
    )

    from django.db import connections
    from django.test import Client

    from kagent.models import ApiKey, Membership, Organization, Project, User
    from kagent.services import api_key_create
    from runs.models import Run, ToolCall

    organization = Organization.objects.create(name="bench org")
    # The project's own request limit, raised as a business with this traffic would have it raised: the default
    # (KAGENT_API_RATE_SECRET a minute) would refuse a long run of the benchmark. Still counted on every request.
    project = Project.objects.create(organization=organization, name="bench project", api_rate_secret=1_000_000)
    user = User.objects.create_user("bench@example.com", "correct horse battery")
    Membership.objects.create(organization=organization, user=user, role=Membership.Role.OWNER)
    _, secret_key = api_key_create(project=project, kind=ApiKey.Kind.SECRET, name="bench")

    def client() -> Client:
        return Client(HTTP_AUTHORIZATION=f"Bearer {secret_key}")

    def post(c: Client, path: str, body: dict[str, Any], expect: int, **extra: str) -> dict[str, Any]:
        response = c.post(path, json.dumps(body), content_type="application/json", **extra)
        if response.status_code != expect:
            raise SystemExit(f"POST {path} answered {response.status_code}: {response.content[:500]!r}")
        data: dict[str, Any] = response.json()
        return data

    api = client()
    post(api, "/v1/tools", TOOL, 201)
    agent_id = post(
        api,
        "/v1/agents",
        {
            "name": "bench",
            "config": {
                "instructions": "You help customers of an online shop with their orders.",
                "model": {"provider": "openai_compatible", "name": f"script:{SCRIPT}"},
                "tools": {"http": [{"tool": "order_status", "rules": "Only for the customer's own order."}]},
            },
        },
        201,
    )["id"]
    post(api, f"/v1/agents/{agent_id}/publish", {}, 201)
    run_body = {"agent": agent_id, "input": f"Where is my order {ORDER}?"}

    customers = itertools.count(1)

    def submit(c: Client) -> str:
        # Each run is another anonymous customer (another address), as in production: the per-customer limits of
        # the policy check (HTTP tools 20 an hour) must not turn the benchmark's tool calls into refusals.
        n = next(customers)
        address = f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"
        return str(post(c, "/v1/runs", run_body, 201, REMOTE_ADDR=address)["id"])

    # --- (b) SQL per run, in this process -------------------------------------------------------------------------
    from llm import openai_compatible, providers
    from runs import engine, services
    from runs.engine import calls as engine_calls

    phases = Phases()
    model_bodies: list[bytes] = []
    original_complete, original_post = providers.complete, openai_compatible.operator_post
    original_http, original_create = vars(engine_calls)["http_tool_call"], services.run_create
    model_calls = [0]

    def complete(request: Any) -> Any:
        model_calls[0] += 1
        phases.mark(f"model{model_calls[0]}:start")
        try:
            return original_complete(request)
        finally:
            phases.mark(f"model{model_calls[0]}:end")

    def operator_post(url: str, **kwargs: Any) -> Any:
        model_bodies.append(kwargs["body"])
        return original_post(url, **kwargs)

    def http_tool_call(**kwargs: Any) -> Any:
        phases.mark("http:start")
        try:
            return original_http(**kwargs)
        finally:
            phases.mark("http:end")

    def run_create(**kwargs: Any) -> Any:
        phases.mark("create:start")
        try:
            return original_create(**kwargs)
        finally:
            phases.mark("create:end")

    providers.complete, openai_compatible.operator_post = complete, operator_post
    vars(engine_calls)["http_tool_call"], services.run_create = http_tool_call, run_create
    try:
        cold_api = cold_engine = 0
        for attempt in ("cold", "warm"):
            model_calls[0] = 0
            model_bodies.clear()
            with phases.capture() as ctx:
                run_id = submit(api)
            api_queries, api_marks = list(ctx.captured_queries), list(phases.marks)
            with phases.capture() as ctx:
                engine.run_execute(run_id)
            engine_queries = list(ctx.captured_queries)
            run = Run.objects.get(pk=run_id)
            if run.status != Run.Status.COMPLETED or (run.output or {}).get("text") != ANSWER:
                raise SystemExit(f"(b): the in-process run ended {run.status}: {run.last_error or run.output}")
            if attempt == "cold":
                cold_api, cold_engine = len(api_queries), len(engine_queries)
    finally:
        providers.complete, openai_compatible.operator_post = original_complete, original_post
        vars(engine_calls)["http_tool_call"], services.run_create = original_http, original_create
    if len(model_bodies) != 2:
        raise SystemExit(f"(b): expected 2 model calls, saw {len(model_bodies)}")

    api_phases = Phases()
    api_phases.marks = api_marks
    api_split = api_phases.split(
        api_queries,
        lambda a, b: {None: "auth, middleware, view", "create:start": "run_create (service, enqueue)"}.get(
            a, "after run_create: render"
        ),
    )
    engine_split = phases.split(engine_queries, _engine_phase)
    sql_total = len(api_queries) + len(engine_queries)
    # Django logs BEGIN and COMMIT too (each is a round trip): counted, and also shown apart.
    sql_control = sum(1 for q in api_queries + engine_queries if q["sql"].strip().upper() in ("BEGIN", "COMMIT"))
    shapes = Counter(sql_shape(q["sql"]) for q in api_queries + engine_queries)

    print()
    print(
        f"(b) SQL queries for one run, API to completion: {sql_total}  (target <= 10); "
        f"{sql_total - sql_control} without the {sql_control} BEGIN/COMMIT"
    )
    print(
        f"    first (cold) run: {cold_api} + {cold_engine} = {cold_api + cold_engine} "
        "(once: api key last_used_at, signing secret created)"
    )
    for title, split in (("POST /v1/runs", api_split), ("run_execute", engine_split)):
        print(f"    {title}: {sum(len(s) for _, s in split)}")
        for name, statements in split:
            print(f"      {len(statements):3d}  {name}")
            if args.sql:
                for statement in statements:
                    print(f"             {sql_shape(statement)[:150]}")
    print("    most frequent statement shapes:")
    for shape, count in shapes.most_common(12):
        print(f"      {count:3d}x {shape[:150]}")

    serial: dict[str, list[float]] = {"api": [], "api_cpu": [], "engine": [], "engine_cpu": []}
    not_counted_by_postgres = _postgres_statements_start()
    for _ in range(5 if args.quick else 20):
        t0, c0 = time.perf_counter(), time.process_time()
        run_id = submit(api)
        t1, c1 = time.perf_counter(), time.process_time()
        engine.run_execute(run_id)
        serial["api"].append((t1 - t0) * 1000)
        serial["api_cpu"].append((c1 - c0) * 1000)
        serial["engine"].append((time.perf_counter() - t1) * 1000)
        serial["engine_cpu"].append((time.process_time() - c1) * 1000)
    med = {key: statistics.median(values) for key, values in serial.items()}
    print(
        f"    one run at a time in this process (median of {len(serial['api'])}): POST /v1/runs {med['api']:.1f} ms "
        f"({med['api_cpu']:.1f} ms CPU) + run_execute {med['engine']:.1f} ms ({med['engine_cpu']:.1f} ms CPU)"
    )
    if not not_counted_by_postgres:
        per_run = _postgres_statements() / len(serial["api"])
        print(f"    in PostgreSQL's own statistics (pg_stat_statements, top level), these runs: {per_run:.1f} per run")
    else:
        print(f"    (PostgreSQL's own count not taken: {not_counted_by_postgres})")

    if args.profile:
        _profile(args.profile, lambda: engine.run_execute(submit(api)))
    if args.cpu_split:
        _cpu_split(args.cpu_split, lambda: engine.run_execute(submit(api)))

    # The (b) runs put messages on the queue; the worker would find them claimed. Drop them.
    from kagent.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)

    # --- the worker ---------------------------------------------------------------------------------------------
    worker_env = {**os.environ, **bench_env}
    worker_env.pop("ALLOWED_HOSTS", None)
    worker_count = [0]

    def start_worker() -> tuple[subprocess.Popen[Any], str]:
        worker_count[0] += 1
        log = LOG_DIR / f"worker-{worker_count[0]}.log"
        name = f"{queue}-{worker_count[0]}@{socket.gethostname()}"
        command = worker_command(queue, name, pool=args.pool, concurrency=args.concurrency)
        proc = processes.start(command, env=worker_env, log=log)
        wait_ready(proc, log)
        return proc, name

    def start_web(env: dict[str, str]) -> tuple[subprocess.Popen[Any], str]:
        """gunicorn with the project's gunicorn.conf.py (its workers and threads), on a free port of 127.0.0.1."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        log = LOG_DIR / "web.log"
        proc = processes.start(
            [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "kagent.wsgi"],
            env={
                **env,
                "KAGENT_BIND": f"127.0.0.1:{port}",
                "ALLOWED_HOSTS": "127.0.0.1",
                "KAGENT_TRUSTED_PROXIES": "127.0.0.1/32",
            },
            log=log,
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    return proc, base
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"gunicorn did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)

    def wait_done(ids: list[str], timeout: float) -> None:
        # Polled rarely: this process's CPU and its database backend are measured, and the rates come from the runs'
        # own timestamps (first claim to last completion), not from when this loop noticed.
        deadline = time.monotonic() + timeout
        while True:
            left = Run.objects.filter(pk__in=ids).exclude(status__in=Run.TERMINAL).count()
            if not left:
                return
            if time.monotonic() > deadline:
                stuck = Counter(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
                raise SystemExit(f"runs did not finish within {timeout:.0f}s: {dict(stuck)} (see {LOG_DIR})")
            time.sleep(0.25)

    def check_completed(ids: list[str], what: str) -> None:
        statuses = Counter(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
        calls = ToolCall.objects.filter(run_id__in=ids, status=ToolCall.Status.SUCCEEDED).count()
        if statuses.get(Run.Status.COMPLETED, 0) != len(ids) or calls != len(ids):
            errors = Counter(
                json.dumps(e)
                for e in Run.objects.filter(pk__in=ids, last_error__isnull=False).values_list("last_error", flat=True)
            )
            print(
                f"  WARNING {what}: statuses {dict(statuses)}, successful tool calls {calls}/{len(ids)}, "
                f"errors {dict(errors.most_common(3))}",
                flush=True,
            )
            problems.append(f"{what}: {dict(statuses)}")

    def span(ids: list[str], since: datetime | None = None) -> float:
        from django.db.models import Max, Min

        agg = Run.objects.filter(pk__in=ids).aggregate(first=Min("started_at"), last=Max("completed_at"))
        return float((agg["last"] - (since or agg["first"])).total_seconds())

    def timings(ids: list[str]) -> str:
        """Medians over the runs: in the worker (claim to completion), and the first two claimed (a cold child)."""
        rows = sorted(Run.objects.filter(pk__in=ids).values_list("started_at", "completed_at"))
        took = [(done - start).total_seconds() * 1000 for start, done in rows]
        return (
            f"a run takes {statistics.median(took):.0f} ms in the worker (first two: "
            + ", ".join(f"{t:.0f}" for t in took[:2])
            + " ms)"
        )

    problems: list[str] = []

    # --- (a) engine vs bare loop --------------------------------------------------------------------------------
    import httpx
    from django.utils import timezone

    worker, worker_name = start_worker()
    web = start_web(worker_env) if args.http else None
    postgres = PostgresPids(args.database_url)
    cpu_groups = {
        ("this process (the app's httpx)" if web else "API (this process)"): lambda pid, pgrp, comm: pid == os.getpid(),
        **({"gunicorn (the API)": lambda pid, pgrp, comm: pgrp == web[0].pid} if web else {}),
        # The parent receives each task from Redis, hands it to a pool process and acks it: Celery's own cost.
        "celery worker: parent": lambda pid, pgrp, comm: pid == worker.pid,
        "celery worker: pool processes": lambda pid, pgrp, comm: pgrp == worker.pid and pid != worker.pid,
        "postgres (this database)": lambda pid, pgrp, comm: comm == "postgres" and pid in postgres.pids,
        "redis": lambda pid, pgrp, comm: comm.startswith("redis-server"),
        "fake model": lambda pid, pgrp, comm: pgrp == llm.pid,
        "TLS upstream": lambda pid, pgrp, comm: pgrp == up.pid,
    }
    # Warm up: both worker processes open their connections (database, model, upstream), code paths hot.
    warmup = [submit(api) for _ in range(6)]
    wait_done(warmup, 60)

    model_url = f"{llm_base}/chat/completions"
    model_headers = {"Content-Type": "application/json", "Authorization": "Bearer fake-operator-key"}
    tool_url = f"https://{host}:8443/bench?order={ORDER}"
    tls = ssl.create_default_context(cafile=str(ca_file))

    def baseline(n: int) -> float:
        """runs/s of the bare loop: 2 threads, each its own keep-alive httpx client, n runs in all."""
        errors: list[BaseException] = []

        def loop(count: int) -> None:
            try:
                with httpx.Client(verify=tls, trust_env=False) as http:
                    for _ in range(count):
                        if STOPPING.is_set():
                            return
                        # The engine's own request bodies: streamed answers (Server-Sent Events), read to the end.
                        first = http.post(model_url, content=model_bodies[0], headers=model_headers)
                        assert first.status_code == 200 and b'"tool_calls"' in first.content
                        tool = http.get(tool_url)
                        assert tool.status_code == 200 and tool.json()["data"]
                        second = http.post(model_url, content=model_bodies[1], headers=model_headers)
                        assert second.status_code == 200 and b'"content"' in second.content
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        loop(3)  # connections open, code paths hot
        threads = [threading.Thread(target=loop, args=(c,), daemon=True) for c in (n - n // 2, n // 2)]
        cpu_before = _cpu_sample(cpu_groups, postgres)
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        cpu_baseline.append(_cpu_per_run(cpu_before, _cpu_sample(cpu_groups, postgres), n))
        if errors:
            raise SystemExit(f"the bare loop failed: {errors[0]!r}")
        return n / elapsed

    # Two API threads for the whole of (a), each with its own test Client and database connection (kept open, so
    # the CPU of their PostgreSQL backends is still there to be counted when a rep ends).
    from concurrent.futures import ThreadPoolExecutor

    local = threading.local()
    api_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="api")

    def on_both_threads(job: Callable[[], Any]) -> None:
        barrier = threading.Barrier(2)

        def each() -> None:
            barrier.wait(timeout=30)  # one call per thread
            job()

        for future in [api_pool.submit(each) for _ in range(2)]:
            future.result()

    def submit_many(count: int) -> list[str]:
        if web is not None:
            return submit_many_http(count, web[1])
        if not hasattr(local, "client"):
            local.client = client()
        return [submit(local.client) for _ in range(count) if not STOPPING.is_set()]

    def submit_many_http(count: int, base: str) -> list[str]:
        """As `submit`, over HTTP with a keep-alive client per thread; each run from another customer address,
        forwarded by the trusted proxy the app's server is behind here (KAGENT_TRUSTED_PROXIES)."""
        if not hasattr(local, "http"):
            local.http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret_key}"}, timeout=30)
        ids = []
        for _ in range(count):
            if STOPPING.is_set():
                break
            n = next(customers)
            address = f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"
            response = local.http.post("/v1/runs", json=run_body, headers={"X-Forwarded-For": address})
            if response.status_code != 201:
                raise SystemExit(f"POST /v1/runs answered {response.status_code}: {response.content[:500]!r}")
            ids.append(str(response.json()["id"]))
        return ids

    on_both_threads(lambda: submit_many(1))  # clients made, connections open

    def engine_side(n: int) -> float:
        """runs/s of the engine: 2 API threads submit n runs in all; until the last run's completed_at."""
        cpu_before = _cpu_sample(cpu_groups, postgres)
        since = timezone.now()
        futures = [api_pool.submit(submit_many, c) for c in (n - n // 2, n // 2)]
        ids = [run_id for future in futures for run_id in future.result()]
        wait_done(ids, 60 + n)
        cpu_engine.append(_cpu_per_run(cpu_before, _cpu_sample(cpu_groups, postgres), n))
        check_completed(ids, f"(a) {n} runs")
        details.append(timings(ids))
        return n / span(ids, since)

    print()
    print(f"(a) {reps} x {runs} runs per side, 2 at a time", flush=True)
    engine_rates, baseline_rates, ratios = [], [], []
    details: list[str] = []
    cpu_engine: list[dict[str, float]] = []
    cpu_baseline: list[dict[str, float]] = []
    for rep in range(reps):
        e = engine_side(runs)
        b = baseline(runs)
        engine_rates.append(e)
        baseline_rates.append(b)
        ratios.append(e / b)
        print(
            f"    rep {rep + 1}: engine {e:6.1f} runs/s   bare loop {b:6.1f} runs/s   ratio {e / b:.3f}   "
            f"({details[-1]})",
            flush=True,
        )
    ratio_a = statistics.median(ratios)
    on_both_threads(connections.close_all)
    api_pool.shutdown()
    print(
        f"    median: engine {statistics.median(engine_rates):.1f} runs/s, bare loop "
        f"{statistics.median(baseline_rates):.1f} runs/s, ratio {ratio_a:.3f}  (target >= 0.3)"
    )
    print("    CPU ms per run (median over reps; /proc, whole processes):   engine side   bare loop")
    for group in [*cpu_groups, "total", "not attributed"]:
        e_cpu = statistics.median(c[group] for c in cpu_engine)
        b_cpu = statistics.median(c[group] for c in cpu_baseline)
        print(f"      {group:<31} {e_cpu:7.1f} {b_cpu:11.1f}")
    cpu_total = statistics.median(c["total"] for c in cpu_engine)
    # The host's speed moves both sides (±25% over a day on a shared VM): the bare loop's CPU per run, measured in
    # the same reps, is the yardstick that moves with it. Median over the reps of bare / engine.
    cpu_ratio = statistics.median(b["total"] / e["total"] for b, e in zip(cpu_baseline, cpu_engine, strict=True))
    print(f"    CPU per run, bare loop / engine (median of the reps' ratios): {cpu_ratio:.3f}")

    # --- (c) runs queued at once --------------------------------------------------------------------------------
    from kagent.celery import app as celery_app

    def control(command: str) -> None:
        replies = celery_app.control.broadcast(
            command, arguments={"queue": queue}, destination=[worker_name], reply=True, timeout=10
        )
        if not replies:
            raise SystemExit(f"the worker did not answer {command}")

    def autovacuums() -> int:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT COALESCE(SUM(autovacuum_count + autoanalyze_count), 0) FROM pg_stat_user_tables")
            return int(cursor.fetchone()[0])

    def by_tenth(ids: list[str]) -> str:
        """Median time in the worker per tenth of the batch (in claim order): rising numbers would mean runs get
        slower as the queue drains or the tables grow."""
        rows = sorted(Run.objects.filter(pk__in=ids).values_list("started_at", "completed_at"))
        took = [(done - start).total_seconds() * 1000 for start, done in rows]
        tenth = max(1, len(took) // 10)
        return " ".join(f"{statistics.median(took[i : i + tenth]):.0f}" for i in range(0, tenth * 10, tenth))

    def batch(size: int, warm: bool) -> float:
        """ms per run for `size` runs queued before the worker takes any: first claim to last completion."""
        nonlocal worker, worker_name
        t_submit = time.monotonic()
        ids = [submit(api) for _ in range(size)]
        submitted = time.monotonic() - t_submit
        vacuums = autovacuums()
        if warm:
            control("add_consumer")
        else:
            worker, worker_name = start_worker()
        wait_done(ids, 120 + size)
        if warm:
            control("cancel_consumer")
        else:
            Processes.stop(worker)
        check_completed(ids, f"(c) {size} queued")
        result = span(ids) / size * 1000
        print(
            f"    {size:5d} queued: {result:6.1f} ms/run   ({timings(ids)}; submitting took "
            f"{submitted / size * 1000:.1f} ms/run)",
            flush=True,
        )
        if size >= 100:
            ran = autovacuums() - vacuums
            print(
                f"           ms in the worker by tenth of the batch: {by_tenth(ids)}"
                + (f"   (autovacuum/analyze ran {ran}x meanwhile)" if ran else ""),
                flush=True,
            )
        return result

    per_run: dict[str, dict[int, float]] = {}
    for warm in (True, False):
        print()
        if warm:
            print("(c) runs queued at once; then the running (warm) worker starts consuming them", flush=True)
            control("cancel_consumer")
        else:
            Processes.stop(worker)
            print("(c) runs queued at once; then a fresh worker process is started", flush=True)
        mode = "warm" if warm else "cold"
        per_run[mode] = {}
        for size in sizes:
            samples = [batch(size, warm) for _ in range(3 if size < 100 and not args.quick else 1)]
            per_run[mode][size] = statistics.median(samples)
    smallest, largest = min(sizes), max(sizes)
    ratio_c = {mode: values[largest] / values[smallest] for mode, values in per_run.items()}

    # --- worker logs ----------------------------------------------------------------------------------------------
    bad: list[str] = []
    for log in sorted(LOG_DIR.glob("worker-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if "Requeuing undeliverable message" in line:
                continue  # a message fetched just as (c) cancelled the consumer: put back, taken later
            if re.search(r"\b(ERROR|CRITICAL|Traceback)\b|WARNING/|internal error|WorkerLostError", line):
                bad.append(f"{log.name}: {line[:200]}")
    print()
    print(f"worker logs ({LOG_DIR.relative_to(ROOT)}): {len(bad)} error/warning lines")
    for line in bad[:10]:
        print(f"    {line}")

    # --- the table ------------------------------------------------------------------------------------------------
    print()
    print(f"{'metric':<48} {'value':>10}   target")
    print(f"{'(a) engine runs/s (API + Celery + PostgreSQL)':<48} {statistics.median(engine_rates):>10.1f}")
    print(f"{'    bare httpx loop runs/s':<48} {statistics.median(baseline_rates):>10.1f}")
    print(f"{'    ratio engine / bare (median of ' + str(reps) + ')':<48} {ratio_a:>10.3f}   >= 0.3")
    print(f"{'    CPU ms per run, all processes':<48} {cpu_total:>10.1f}   <= 15")
    print(f"{'    CPU per run, bare loop / engine':<48} {cpu_ratio:>10.3f}")
    print(f"{'(b) SQL queries per run (API + engine)':<48} {sql_total:>10d}   <= 10")
    print(f"{'    of which BEGIN/COMMIT':<48} {sql_control:>10d}")
    for mode, label in (("warm", "running worker"), ("cold", "fresh worker")):
        for size in sizes:
            print(f"{f'(c) ms/run, {size} queued, {label}':<48} {per_run[mode][size]:>10.1f}")
        print(f"{f'    ratio {largest} vs {smallest}, {label}':<48} {ratio_c[mode]:>10.2f}   <= 1.2")
    if problems:
        print(f"problems: {'; '.join(problems)}")
    print(f"(total {time.monotonic() - started_all:.0f}s)")


if __name__ == "__main__":
    main()
