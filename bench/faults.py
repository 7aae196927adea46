"""Faults: scenarios on the real stack, each with its own pass or fail, one command.

    .venv/bin/python bench/faults.py                 # every scenario, long form (a few minutes on 2 cores)
    .venv/bin/python bench/faults.py --quick         # short form (tests/proofs/test_faults.py runs it)
    .venv/bin/python bench/faults.py --only redis,postgres --runs 200

Everything runs on servers of its own, so nothing shared is restarted: a throwaway PostgreSQL cluster and Redis
(kagent/embedded.py: the wheels' PostgreSQL 18 and Redis on unix sockets in a temporary folder, no persistence),
with the stack of bench/stack.py (gunicorn, 2 Celery workers, Celery beat) on them, the scripted model and the
business API of fakes/. The lease and sweep are shortened (lease 3 s, sweep every 1 s, a queued run's message sent
again after 5 s, the model's timeout 1 s) so a scenario ends in seconds.

Scenarios (each in a project of its own; after each, every run of the project must be terminal):
- load: the load of bench/load.py without faults (the short form of the load benchmark, 40 runs with --quick):
  every run completed, no call delivered twice.
- upstream: runs whose model answers 500s, times out, or asks for a tool with malformed arguments, and runs whose
  business API answers a 302, a 503, too slowly, or more than 1 MiB. Each run must end in its expected status
  and error code (the model's failures: failed, model_error; the tool's: completed, with the call failed and its
  egress code, or refused invalid_arguments); a 5xx may be tried again (same webhook-id), nothing that succeeded is.
- worker_kill: the load while the workers are SIGKILLed (each whole process group) in turn, each once it is up
  and has worked a second, and started again (2 kills with --quick, 6 in the long form).
- redis: the load while Redis is stopped mid-load and started again 3 s later, empty.
- postgres: the load while PostgreSQL is stopped (fast shutdown) mid-load and started again 3 s later.
For the last three: every run completed (the app rides out the outage: a failed request is tried again for up to
60 s), none lost, no HTTP tool call sent again after it succeeded (a call in flight when its worker died is sent
again with the same webhook-id: counted and shown).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from env import ROOT, setup_django_fresh
from load import CART, SCRIPTS, App, make_project, order_tool, print_report, run_load
from stack import Stack

from kagent import embedded

FAULT_SCRIPTS: dict[str, list[dict[str, Any]]] = {
    **SCRIPTS,
    # Every attempt at the first turn fails (the fault counter is per turn, shared by all runs).
    "model-500": [{"text": "never", "faults": [{"status": 500}] * 20_000}],
    "model-timeout": [{"text": "never", "faults": [{"delay_s": 3.0}] * 20_000}],
    "model-malformed": [
        {"tool_calls": [{"name": "order_status", "arguments": '{"order_number": "88'}]},
        {"text": "I could not look that order up."},
    ],
    "tool-fails": [
        {"tool_calls": [{"name": "order_status", "arguments": {"order_number": "8812"}}]},
        {"text": "I could not look that order up right now."},
    ],
}
# business API faults: name -> (path on the fake business API, the failed call's egress code)
UPSTREAM_FAULTS = {
    "redirect": ("/redirect", "redirect_not_followed"),
    "server_error": ("/status/503", "upstream_status"),
    "slow": ("/trickle-body", "timeout"),  # one byte every 0.2 s: past the tool's 2 s deadline
    "oversize": ("/big-chunked", "response_too_large"),  # 2 MiB, chunked: refused while streaming
}


# --- throwaway servers --------------------------------------------------------------------------------------------


class Throwaway:
    """A PostgreSQL cluster and a Redis of this run's own (kagent/embedded.py: the wheels' servers, on unix sockets in
    a temporary folder, not durable), stopped and removed at the end. Restarts are theirs to do: Redis comes back
    empty (it keeps nothing on disk), PostgreSQL with its data."""

    def __init__(self, tmp: Path) -> None:
        self.services = embedded.Services.under(tmp / "servers", durable=False)
        (tmp / "servers").mkdir()
        (tmp / "servers").chmod(0o711)  # searchable by PostgreSQL's account when we are root
        tmp.chmod(0o711)

    @property
    def database_url(self) -> str:
        return self.services.postgres.url("kagent_bench_faults")

    @property
    def redis_url(self) -> str:
        return self.services.redis.url()

    def start(self) -> None:
        self.services.start()
        self.services.postgres.create_database("kagent_bench_faults")

    def start_postgres(self) -> None:
        self.services.postgres.start()

    def stop_postgres(self) -> None:
        self.services.postgres.stop()

    def start_redis(self) -> None:
        self.services.redis.start()

    def stop_redis(self) -> None:
        self.services.redis.stop()

    def stop(self) -> None:
        self.services.stop()


# --- scenarios ----------------------------------------------------------------------------------------------------


class Context:
    def __init__(self, stack: Stack, servers: Throwaway, runs: int, load_runs: int, kills: int) -> None:
        self.stack, self.servers, self.runs, self.load_runs = stack, servers, runs, load_runs
        self.kills = kills

    def project(self, name: str, patience: float = 0.0) -> tuple[str, App]:
        project_id, key = make_project(name)
        return project_id, App(self.stack.base_url, key, concurrency=8, patience=patience)


def _settled_load(
    ctx: Context,
    name: str,
    during: Callable[[threading.Event], None] | None,
    busy_until: threading.Event | None = None,
) -> tuple[bool, dict[str, Any]]:
    project_id, app = ctx.project(name, patience=60.0 if during else 0.0)
    try:
        report = run_load(
            ctx.stack,
            app,
            project_id,
            runs=ctx.runs,
            concurrency=8,
            timeout=180,
            during=during,
            busy_until=busy_until,
        )
    finally:
        app.close()
    ok = (
        report["runs_lost"] == 0
        and report["statuses"].get("completed", 0) == report["runs_created"] == report["runs_submitted"]
        and report["delivered_again_after_success"] == 0
        and report["http_calls_not_delivered"] == 0
    )
    if during is None:
        ok = ok and report["delivered_twice"] == 0
    return ok, report


def scenario_load(ctx: Context) -> tuple[bool, dict[str, Any]]:
    runs, ctx.runs = ctx.runs, ctx.load_runs
    try:
        return _settled_load(ctx, "load", None)
    finally:
        ctx.runs = runs


def scenario_worker_kill(ctx: Context) -> tuple[bool, dict[str, Any]]:
    kills = Counter[str]()
    killed = threading.Event()  # runs keep coming until the last kill: each one lands on runs in flight

    def killer(stop: threading.Event) -> None:
        # Each worker in turn, once it is up and has had a second of work: SIGKILLed, then started again while the
        # other one works. A fixed number of kills, then the system is left to recover.
        try:
            for turn in range(ctx.kills):
                index = turn % 2
                while not ctx.stack.worker_ready(index) and not stop.wait(0.2):
                    pass
                if stop.wait(1.0 if turn else 0.3):
                    return
                ctx.stack.kill_worker(index)
                kills["SIGKILL"] += 1
                ctx.stack.start_worker(index, wait=False)
        finally:
            killed.set()

    ok, report = _settled_load(ctx, "worker-kill", killer, busy_until=killed)
    report["workers_killed"] = kills["SIGKILL"]
    return ok and kills["SIGKILL"] == ctx.kills, report


def _outage(stop_server: Callable[[], None], start_server: Callable[[], None], events: list[str]) -> Any:
    def outage(stop: threading.Event) -> None:
        time.sleep(1.0)  # mid-load: runs are being submitted and worked on
        stop_server()
        events.append(f"stopped at {time.strftime('%H:%M:%S')}")
        time.sleep(3.0)
        start_server()
        events.append(f"started at {time.strftime('%H:%M:%S')}")

    return outage


def scenario_redis(ctx: Context) -> tuple[bool, dict[str, Any]]:
    events: list[str] = []
    ok, report = _settled_load(ctx, "redis", _outage(ctx.servers.stop_redis, ctx.servers.start_redis, events))
    report["outage"] = events
    return ok and len(events) == 2, report


def scenario_postgres(ctx: Context) -> tuple[bool, dict[str, Any]]:
    events: list[str] = []
    outage = _outage(ctx.servers.stop_postgres, ctx.servers.start_postgres, events)
    ok, report = _settled_load(ctx, "postgres", outage)
    report["outage"] = events
    return ok and len(events) == 2, report


def scenario_upstream(ctx: Context) -> tuple[bool, dict[str, Any]]:
    """The model and the business API misbehaving: each run's expected outcome."""
    from runs.models import Run, ToolCall

    project_id, app = ctx.project("upstream")
    origin = ctx.stack.upstream_origin
    expected: dict[str, tuple[str, str]] = {}  # agent -> (run status, code: last_error's or the tool call's)
    agents: dict[str, str] = {}

    def agent(label: str, script: str, tool: str | None) -> None:
        tools: dict[str, Any] = {"http": [{"tool": tool}]} if tool else {"client": [CART]}
        config = {"model": {"provider": "openai_compatible", "name": f"script:{script}"}, "tools": tools}
        agent_id = app.call("POST", "/v1/agents", "setup", {"name": label, "config": config})["id"]
        app.call("POST", f"/v1/agents/{agent_id}/publish", "setup", {})
        agents[label] = agent_id

    try:
        app.call("POST", "/v1/tools", "setup", order_tool(origin))
        for name, (path, _) in UPSTREAM_FAULTS.items():
            tool = order_tool(origin, path, timeout_ms=2000)
            tool["name"] = f"order_status_{name}"
            tool["config"]["parameters"]["properties"]["order_number"]["description"] = "The order number"
            app.call("POST", "/v1/tools", "setup", tool)
        agent("model-500", "model-500", "order_status")
        agent("model-timeout", "model-timeout", "order_status")
        agent("model-malformed", "model-malformed", "order_status")
        expected |= {
            "model-500": ("failed", "model_error"),
            "model-timeout": ("failed", "model_error"),
            "model-malformed": ("completed", "refused:invalid_arguments"),
        }
        for name in UPSTREAM_FAULTS:
            label = f"api-{name}"
            agent(label, f"tool-fails-{name}", f"order_status_{name}")  # its script names its own tool
            expected[label] = ("completed", UPSTREAM_FAULTS[name][1])
        per_agent = max(1, ctx.runs // len(agents))
        runs: dict[str, str] = {}
        for index in range(per_agent * len(agents)):
            label = list(agents)[index % len(agents)]
            run = app.call("POST", "/v1/runs", "POST /v1/runs", {"agent": agents[label], "input": "order 8812?"})
            runs[run["id"]] = label
        deadline = time.monotonic() + 180
        project_runs = Run.objects.filter(project_id=project_id)
        while project_runs.exclude(status__in=Run.TERMINAL).exists() and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        app.close()
    outcomes: Counter[str] = Counter()
    wrong: list[str] = []
    for run in project_runs:
        label = runs[run.pk]
        status, code = expected[label]
        calls = list(ToolCall.objects.filter(run_id=run.pk, kind__in=("http", "")))
        if status == "failed":
            seen = (run.status, (run.last_error or {}).get("code", ""))
            want = (status, code)
        elif code.startswith("refused:"):
            seen = (run.status, ",".join(f"{c.policy_decision}:{c.policy_code}" for c in calls))
            want = (status, "refused:" + code.split(":", 1)[1])
        else:
            egress = ",".join(f"{c.status}:{(c.upstream or {}).get('error_code', '')}" for c in calls)
            seen, want = (run.status, egress), (status, f"failed:{code}")
        outcomes[f"{label}: {seen[0]} {seen[1]}"] += 1
        if seen != want:
            wrong.append(f"{label}: {seen}, expected {want}")
    deliveries = ctx.stack.deliveries()
    succeeded = set(ToolCall.objects.filter(project_id=project_id, status="succeeded").values_list("id", flat=True))
    report = {
        "runs": len(runs),
        "runs_terminal": project_runs.filter(status__in=Run.TERMINAL).count(),
        "outcomes": dict(sorted(outcomes.items())),
        "wrong": wrong[:10],
        "calls_delivered_more_than_once": sum(1 for times in deliveries.values() if len(times) > 1),
        "succeeded_calls_sent_again": sum(1 for call_id in succeeded if len(deliveries.get(call_id, [])) > 1),
    }
    ok = not wrong and report["runs_terminal"] == len(runs) and report["succeeded_calls_sent_again"] == 0
    return ok, report


FAULT_SCRIPTS_LOCAL: dict[str, list[dict[str, Any]]] = {}
SCENARIOS: dict[str, Callable[[Context], tuple[bool, dict[str, Any]]]] = {
    "load": scenario_load,
    "upstream": scenario_upstream,
    "worker_kill": scenario_worker_kill,
    "redis": scenario_redis,
    "postgres": scenario_postgres,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short form: 24 runs a scenario, 40 for the load")
    parser.add_argument("--runs", type=int, default=None, help="runs per scenario (default 120; --quick 24)")
    parser.add_argument("--load-runs", type=int, default=None, help="runs of the load scenario (--quick: 40)")
    parser.add_argument("--only", default="", help="comma-separated scenarios: " + ",".join(SCENARIOS))
    args = parser.parse_args()
    runs = args.runs or (24 if args.quick else 120)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()] or list(SCENARIOS)
    unknown = set(chosen) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"unknown scenarios: {', '.join(sorted(unknown))}")
    for name in UPSTREAM_FAULTS:
        FAULT_SCRIPTS_LOCAL[f"tool-fails-{name}"] = [
            {"tool_calls": [{"name": f"order_status_{name}", "arguments": {"order_number": "8812"}}]},
            {"text": "I could not look that order up right now."},
        ]
    results: dict[str, bool] = {}
    tmp = Path(tempfile.mkdtemp(prefix="kagent-faults-"))
    servers = Throwaway(tmp)
    stack: Stack | None = None
    started = time.monotonic()
    try:
        servers.start()
        setup_django_fresh(servers.database_url, servers.redis_url, tmp)
        stack = Stack(
            database_url=servers.database_url,
            redis_url=servers.redis_url,
            tmp=tmp,
            log_dir=ROOT / "var" / "bench-faults",
            scripts={**FAULT_SCRIPTS, **FAULT_SCRIPTS_LOCAL},
            workers=2,
            beat=True,
            settings={
                "KAGENT_RUN_LEASE_SECONDS": "3",
                "KAGENT_SWEEP_SECONDS": "1",
                "KAGENT_RUN_RESEND_MISSING_SECONDS": "5",
                "KAGENT_LLM_TIMEOUT_S": "1",
            },
        ).start()
        print(f"stack up on throwaway servers in {tmp / 'servers'}", flush=True)
        ctx = Context(stack, servers, runs, args.load_runs or (40 if args.quick else runs), 2 if args.quick else 6)
        random.seed(12)
        for name in chosen:
            t0 = time.monotonic()
            try:
                ok, report = SCENARIOS[name](ctx)
            except Exception as exc:  # a scenario that crashes fails; the others still run
                ok, report = False, {"crashed": repr(exc)[:500], "where": traceback.format_exc().splitlines()[-12:]}
            results[name] = ok
            report["scenario_seconds"] = round(time.monotonic() - t0, 1)
            print_report(f"{name}: {'PASS' if ok else 'FAIL'}", report)
            sys.stdout.flush()
    finally:
        if stack:
            stack.stop()
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        servers.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{len(results)} scenarios in {time.monotonic() - started:.0f} s:")
    for name, ok in results.items():
        print(f"  {name:12s} {'PASS' if ok else 'FAIL'}")
    raise SystemExit(0 if results and all(results.values()) else 1)


if __name__ == "__main__":
    main()
