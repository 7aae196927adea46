"""Load: N concurrent runs against the real stack, one command.

    .venv/bin/python bench/load.py                  # 1,000 runs (a few minutes on 2 cores)
    .venv/bin/python bench/load.py --runs 100       # also: --concurrency 16 --workers 2 --database-url --redis-url

The stack (bench/stack.py): gunicorn with gunicorn.conf.py (2 processes × 8 threads), Celery workers (prefork, 2
children each) on Redis, a fresh PostgreSQL database (`--database-url`, whose name must contain "bench", dropped at
the end; without it, and `--redis-url`, throwaway embedded servers of kagent/embedded.py), the zero-latency
scripted model (fakes/llm.py) and the business's HTTPS API (fakes/upstream.py), which counts every delivery by
`webhook-id`. Nothing is mocked.

The runs, submitted by `--concurrency` threads of a simulated app over HTTP with the project's secret key, in
turn (out of every five): a one-shot run calling an HTTP tool (`order_status`, GET on the business API, signed),
a one-shot run answered with text alone, a session run calling the HTTP tool, a session run calling a client tool
(`get_cart`) that the app answers with `submit_tool_outputs` when it sees the run waiting (it lists
`requires_action` runs), and another one-shot HTTP tool run.

Reported: runs terminal and by status, runs lost (not terminal when the load ends: must be 0), HTTP tool calls
delivered more than once (must be 0) and not delivered, API latency p50/p95/p99 by request kind, runs/s (runs
over the time from the first submission to the last completion). Exit status 1 when a run is lost, ends otherwise
than completed, or a call was delivered twice.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from env import ROOT, drop_database, servers, setup_django_fresh
from stack import Stack

ORDER = "8812"
SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "load-http": [
        {"tool_calls": [{"name": "order_status", "arguments": {"order_number": ORDER}}]},
        {"text": f"Order {ORDER} has shipped."},
    ],
    "load-text": [{"text": "Hello! Our shop is open every day."}],
    "load-client": [{"tool_calls": [{"name": "get_cart", "arguments": {}}]}, {"text": "You have two items."}],
}
CART = {
    "name": "get_cart",
    "description": "Returns the items in the customer's cart.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    "effect": "read",
}
MIX = ("oneshot_http", "oneshot_text", "session_http", "session_client", "oneshot_http")


def order_tool(origin: str, path: str = "/orders", *, timeout_ms: int = 5000) -> dict[str, Any]:
    return {
        "name": "order_status",
        "description": "Look up the status of an order by its number.",
        "effect": "read",
        "requires_verified_user": False,
        "config": {
            "method": "GET",
            "url": origin + path + "?order={{args.order_number}}",
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
            },
            "timeout_ms": timeout_ms,
        },
    }


class App:
    """The business's app: calls the API over HTTP, times every request, and rides out an outage (a connection
    error or a 5xx is tried again, up to `patience` seconds, and counted)."""

    def __init__(self, base_url: str, key: str, *, concurrency: int = 16, patience: float = 0.0) -> None:
        import httpx

        limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60, limits=limits
        )
        self.patience = patience
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.failures: Counter[str] = Counter()
        self._lock = threading.Lock()

    def call(self, method: str, path: str, kind: str, body: Any = None, expect: tuple[int, ...] = (200, 201)) -> Any:
        import httpx

        deadline = time.monotonic() + self.patience
        while True:
            started = time.perf_counter()
            try:
                response = self.http.request(method, path, json=body)
            except httpx.HTTPError as exc:
                outcome: Any = type(exc).__name__
            else:
                with self._lock:
                    self.latencies[kind].append((time.perf_counter() - started) * 1000)
                if response.status_code in expect:
                    return response.json()
                outcome = response.status_code
                if response.status_code < 500:
                    raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
            with self._lock:
                self.failures[f"{kind}: {outcome}"] += 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"{method} {path}: {outcome}, and still after {self.patience:.0f} s")
            time.sleep(0.5)

    def close(self) -> None:
        self.http.close()


def prepare(app: App, origin: str, *, tool: dict[str, Any] | None = None) -> dict[str, str]:
    """The project's HTTP tool and three published agents (one per script); returns {script: agent id}."""
    app.call("POST", "/v1/tools", "setup", tool or order_tool(origin))
    agents = {}
    for script in SCRIPTS:
        tools: dict[str, Any] = {"http": [{"tool": "order_status", "rules": "Only the customer's own order."}]}
        if script == "load-client":
            tools = {"client": [CART]}
        config = {
            "instructions": "You help customers of an online shop.",
            "model": {"provider": "openai_compatible", "name": f"script:{script}"},
            "tools": tools,
        }
        agent = app.call("POST", "/v1/agents", "setup", {"name": script, "config": config})["id"]
        app.call("POST", f"/v1/agents/{agent}/publish", "setup", {})
        agents[script] = agent
    return agents


def submit(app: App, agents: dict[str, str], kind: str) -> str:
    script = {"oneshot_text": "load-text", "session_client": "load-client"}.get(kind, "load-http")
    body: dict[str, Any] = {"agent": agents[script], "input": f"Where is my order {ORDER}?"}
    if kind.startswith("session"):
        body["session"] = app.call("POST", "/v1/sessions", "POST /v1/sessions", {"agent": agents[script]})["id"]
    return str(app.call("POST", "/v1/runs", "POST /v1/runs", body)["id"])


def answer_client_tools(app: App, stop: threading.Event, answered: set[str]) -> None:
    """The app's side of a client tool: each run waiting on it gets the cart."""
    while not stop.is_set():
        try:
            waiting = app.call("GET", "/v1/runs?status=requires_action&limit=100", "GET /v1/runs")["data"]
        except RuntimeError:
            waiting = []
        for run in waiting:
            outputs = [{"call_id": c["call_id"], "output": {"items": 2}} for c in run["required_action"]["tool_calls"]]
            try:
                app.call(
                    "POST",
                    f"/v1/runs/{run['id']}/submit_tool_outputs",
                    "POST …/submit_tool_outputs",
                    {"tool_outputs": outputs},
                )
                answered.add(run["id"])
            except RuntimeError as exc:
                if "run_not_awaiting_outputs" not in str(exc):
                    app.failures[f"submit_tool_outputs: {str(exc)[:80]}"] += 1
        stop.wait(0.3)


def percentiles(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.1f}" if values else "-"
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"p50 {q[49]:.1f}  p95 {q[94]:.1f}  p99 {q[98]:.1f} ms  (n={len(values)})"


def run_load(
    stack: Stack,
    app: App,
    project_id: str,
    *,
    runs: int,
    concurrency: int,
    timeout: float,
    during: Any = None,
    agents: dict[str, str] | None = None,
    busy_until: threading.Event | None = None,
) -> dict[str, Any]:
    """Submits `runs` runs of the mix, answers client tools, waits until every run of the project is terminal (or
    `timeout`), and returns the figures. `during(stop_event)`, if given, runs in a thread meanwhile (a fault); with
    `busy_until`, runs keep being submitted, `concurrency` at a time, until that event is set (a fault that must
    happen while runs are in flight), and `runs_submitted` counts them all."""
    from django.db import InterfaceError, OperationalError, connection
    from django.db.models import Max

    from runs.models import Run, ToolCall

    agents = agents or prepare(app, stack.upstream_origin)
    stop, answered = threading.Event(), set[str]()
    answerer = threading.Thread(target=answer_client_tools, args=(app, stop, answered), daemon=True)
    answerer.start()
    fault = threading.Thread(target=during, args=(stop,), daemon=True) if during else None
    started, started_monotonic = time.time(), time.monotonic()
    if fault:
        fault.start()
    submit_errors: list[str] = []

    def one(index: int) -> str | None:
        try:
            return submit(app, agents, MIX[index % len(MIX)])
        except RuntimeError as exc:
            submit_errors.append(str(exc)[:200])
            return None

    with ThreadPoolExecutor(concurrency) as pool:
        ids = [run_id for run_id in pool.map(one, range(runs)) if run_id]
        # A fault that must happen under load (`busy_until`): runs keep coming until it is over.
        while busy_until is not None and not busy_until.is_set() and time.monotonic() < started_monotonic + timeout:
            ids += [run_id for run_id in pool.map(one, range(runs, runs + concurrency)) if run_id]
            runs += concurrency
    submitted = time.time()
    deadline = time.monotonic() + timeout
    project_runs = Run.objects.filter(project_id=project_id)
    while time.monotonic() < deadline:
        try:
            if not project_runs.exclude(status__in=Run.TERMINAL).exists():
                break
        except (OperationalError, InterfaceError):  # the database is restarting (a fault): ask again
            connection.close()
        time.sleep(0.5)
    stop.set()
    answerer.join(timeout=10)
    if fault:
        fault.join(timeout=120)
        connection.close()  # the fault may have restarted the database under it: the figures on a fresh one
    statuses = Counter(project_runs.values_list("status", flat=True))
    errors = Counter(
        (e or {}).get("code", "") for e in project_runs.filter(status="failed").values_list("last_error", flat=True)
    )
    last = project_runs.aggregate(last=Max("completed_at"))["last"]
    http_calls = ToolCall.objects.filter(project_id=project_id, kind="http")
    # The business API's ledger holds every scenario's deliveries since it started (bench/faults.py runs several on
    # one stack): this project's calls only, so that a call sent again in flight by an earlier scenario's kill isn't
    # counted against this one.
    ours = set(http_calls.values_list("id", flat=True))
    deliveries = {call_id: times for call_id, times in stack.deliveries().items() if call_id in ours}
    succeeded = {
        call_id: finished.timestamp()
        for call_id, finished in http_calls.filter(status="succeeded").values_list("id", "finished_at")
    }
    twice = {call_id: times for call_id, times in deliveries.items() if len(times) > 1}
    after_success = [
        call_id
        for call_id, times in twice.items()
        if call_id in succeeded and sum(1 for when, _ in times if when <= succeeded[call_id]) < len(times)
    ]
    span = (last.timestamp() - started) if last else float("nan")
    terminal = sum(count for status, count in statuses.items() if status in Run.TERMINAL)
    return {
        "runs_submitted": runs,
        "runs_created": sum(statuses.values()),
        "run_ids_returned": len(ids),
        "submit_errors": submit_errors[:5],
        "runs_terminal": terminal,
        "runs_lost": sum(statuses.values()) - terminal,
        "statuses": dict(statuses),
        "failed_codes": dict(errors),
        "http_calls": http_calls.count(),
        "http_calls_succeeded": len(succeeded),
        "http_calls_not_delivered": sum(1 for call_id in succeeded if call_id not in deliveries),
        "delivered_twice": len(twice),
        "delivered_again_after_success": len(after_success),
        "client_tool_runs_answered": len(answered),
        # Picked up again by another worker (its own was lost): more claims than its start and, for a client
        # tool, its resumption.
        "runs_recovered": (
            project_runs.filter(claims__gt=1).exclude(tool_calls__kind="client").count()
            + project_runs.filter(claims__gt=2, tool_calls__kind="client").distinct().count()
        ),
        "api_latency_ms": {kind: percentiles(values) for kind, values in sorted(app.latencies.items())},
        "api_all": percentiles([v for kind, values in app.latencies.items() if kind != "setup" for v in values]),
        "api_failures": dict(app.failures),
        "submit_seconds": round(submitted - started, 1),
        "seconds": round(span, 1),
        "runs_per_second": round(runs / span, 1) if last else 0.0,
        "log_errors": stack.log_errors()[:10],
    }


def print_report(title: str, report: dict[str, Any]) -> None:
    print(f"\n{title}")
    for key, value in report.items():
        if isinstance(value, dict) and key == "api_latency_ms":
            print("  api latency:")
            for kind, text in value.items():
                print(f"    {kind:32s} {text}")
        else:
            print(f"  {key:32s} {json.dumps(value) if isinstance(value, (dict, list)) else value}")


def make_project(name: str) -> tuple[str, str]:
    from kagent.models import ApiKey, Organization, Project
    from kagent.services import api_key_create

    organization = Organization.objects.create(name=f"{name} org")
    project = Project.objects.create(organization=organization, name=f"{name} project")
    _, secret = api_key_create(project=project, kind=ApiKey.Kind.SECRET, name=name)
    return project.pk, secret


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16, help="the app's threads submitting runs")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (2 children each)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for every run to end")
    parser.add_argument(
        "--database-url",
        default="",
        help="a PostgreSQL database to DROP and create (default: a throwaway embedded one)",
    )
    parser.add_argument("--redis-url", default="", help="default: a throwaway embedded Redis")
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp_name,
        servers(args.database_url, args.redis_url, "kagent_bench_load") as (database_url, redis_url),
    ):
        args.database_url, args.redis_url = database_url, redis_url
        tmp = Path(tmp_name)
        setup_django_fresh(args.database_url, args.redis_url, tmp)
        project_id, key = make_project("load")
        stack = Stack(
            database_url=args.database_url,
            redis_url=args.redis_url,
            tmp=tmp,
            log_dir=ROOT / "var" / "bench-load",
            scripts=SCRIPTS,
            workers=args.workers,
        )
        app = None
        try:
            stack.start()
            app = App(stack.base_url, key, concurrency=args.concurrency)
            print(f"stack up: web {stack.base_url}, {args.workers} workers, queue {stack.queue}", flush=True)
            report = run_load(
                stack, app, project_id, runs=args.runs, concurrency=args.concurrency, timeout=args.timeout
            )
        finally:
            if app:
                app.close()
            stack.stop()
            if not args.keep_db:
                from django.db import connections

                connections.close_all()
                with contextlib.suppress(Exception):
                    drop_database(args.database_url)
    print_report(f"load: {args.runs} runs, {args.concurrency} at a time, {args.workers} workers", report)
    ok = (
        report["runs_lost"] == 0
        and report["statuses"].get("completed", 0) == report["runs_created"] == args.runs
        and report["delivered_twice"] == 0
    )
    print("\nPASS" if ok else "\nFAIL")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
