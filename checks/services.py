"""An agent's checks (SPEC §4 "Checks and traffic", issue 30): saved test conversations run in the sandbox against the
draft or a published version, before a publish or on demand.

A check's run is a sandbox run with `check_options`: actions are simulated (nothing reaches an action endpoint, the
desk or webhooks), read tools run live as in the test panel, client tools are answered from the check's
`client_outputs`, and a call that would wait for approval counts as approved (runs/engine/decisions.py). A check
with several turns runs them one after another in one test conversation. Checks run `KAGENT_CHECK_CONCURRENCY` at
a time, each in a thread of its own; a check run's result is one entry per check: `{check, name, passed,
problems, run}`.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from agents.models import Agent, AgentVersion
from agents.services import agent_publish
from checks.models import Check, CheckRun
from conversations.identity import EndUserClaim
from conversations.models import Session
from conversations.services import panel_session_create
from kagent import broker
from kagent.errors import ApiError, Conflict, NotFound, Unprocessable
from kagent.models import Project
from runs import engine
from runs.models import Run, ToolCall
from runs.services import run_create

logger = logging.getLogger(__name__)

MAX_CHECKS = 50
# At most one check run of an agent at a time, and this many of a project (each holds a worker while it runs).
MAX_RUNNING_PER_PROJECT = 3
# The customer turns one check run may play, all its checks together: the rest fail with check_budget_exhausted.
TURN_BUDGET = 200
EXECUTE_TASK = "runs.check_run_execute"
RUN_WAIT_S = 900.0  # a check's run another worker took: how long to wait for it
CHECK_RUN_STALE = timedelta(hours=3)  # longer than any check run can take (the task's time limit is 30 minutes)
SETTLED = (*Run.TERMINAL, Run.Status.REQUIRES_ACTION)


# --- writing checks ---------------------------------------------------------------------------------------------


def check_update(*, check: Check, fields: dict[str, Any]) -> Check:
    for key, value in fields.items():
        setattr(check, key, value)
    check.updated_at = timezone.now()
    check.save()
    return check


def check_create(*, agent: Agent, fields: dict[str, Any]) -> Check:
    if Check.objects.filter(agent=agent).count() >= MAX_CHECKS:
        raise Unprocessable("too_many_checks", f"An agent has at most {MAX_CHECKS} checks; delete one first.")
    return Check.objects.create(project_id=agent.project_id, agent=agent, **fields)


def check_from_run(*, agent: Agent, run_id: str, name: str | None) -> dict[str, Any]:
    """A check's fields made from a run of this agent (a real or a test-panel one): its input, its end user, and the
    tools it called as the expectation."""
    run = Run.objects.filter(project_id=agent.project_id, agent=agent, pk=run_id).select_related("end_user").first()
    if run is None:
        raise NotFound("No run of this agent with that id.")
    if not run.input:
        raise Unprocessable("invalid_request", "$.from_run: that run's input is gone (store: false); nothing to check.")
    called = ToolCall.objects.filter(run=run, status=ToolCall.Status.SUCCEEDED).order_by("round", "index")
    end_user = None
    if run.end_user is not None:
        end_user = {"external_id": run.end_user.external_id}
    return {
        "name": (name or f"From {run.pk}")[:200],
        "input": run.input,
        "end_user": end_user,
        "client_outputs": {},
        "expect": {"tools_called": list(dict.fromkeys(call.name for call in called))},
    }


# --- publishing ---------------------------------------------------------------------------------------------------


def publish_checked(*, agent: Agent, note: str | None, force: bool = False) -> AgentVersion:
    """Publishes the draft once its checks pass (run here, concurrently, when it has any): a failure is 409
    `checks_failed` naming each failing check and why, unless `force` (with a note), which publishes and records
    `forced` and the failures on the version."""
    if force and not (note or "").strip():
        message = "say in the note why this is published although its checks may fail"
        raise Unprocessable("invalid_request", f"$.note: {message}", details=[{"path": "$.note", "message": message}])
    failures: list[dict[str, Any]] = []
    checked = Agent.objects.only("updated_at").get(pk=agent.pk).updated_at  # the draft the checks run on
    if Check.objects.filter(agent=agent).exists():
        check_run = check_run_execute(check_run_start(agent=agent, version=None, queue=False).pk)
        failures = [result for result in check_run.results if not result["passed"]]
        if failures and not force:
            said = "; ".join(f"{f['name']}: {', '.join(f['problems'])}" for f in failures)
            raise Conflict(
                "checks_failed",
                f"Not published: {len(failures)} check(s) failed. {said}"[:2000],
                details={"check_run": check_run.pk, "failures": failures},
            )
    return agent_publish(agent=agent, note=note, check_failures=failures, draft_of=checked)


# --- running them -----------------------------------------------------------------------------------------------


def check_run_start(*, agent: Agent, version: int | None, queue: bool = True) -> CheckRun:
    """A check run of every check of the agent against the draft (`version` None) or a published version; queued
    for a worker (`queue`), or left for the caller to execute. No checks: passed at once."""
    if version is not None and not AgentVersion.objects.filter(agent=agent, number=version).exists():
        raise NotFound("This agent has no version with that number.")
    has_checks = Check.objects.filter(agent=agent).exists()
    with transaction.atomic():
        if has_checks:
            _refuse_if_running(agent)
        check_run = CheckRun.objects.create(
            project_id=agent.project_id,
            agent=agent,
            version=version,
            status=CheckRun.Status.RUNNING if has_checks else CheckRun.Status.PASSED,
            finished_at=None if has_checks else timezone.now(),
        )
    if has_checks and queue:
        broker.enqueue(EXECUTE_TASK, check_run.pk)
    return check_run


def _refuse_if_running(agent: Agent) -> None:
    """409 `check_run_in_progress` while the agent has a check run running, or the project has
    MAX_RUNNING_PER_PROJECT. Under the project's row lock (FOR NO KEY UPDATE: the rows that refer to the project,
    taking FOR KEY SHARE, don't wait for it): two starts at once can't both pass."""
    Project.objects.select_for_update(no_key=True).filter(pk=agent.project_id).first()
    running = CheckRun.objects.filter(
        project_id=agent.project_id,
        status=CheckRun.Status.RUNNING,
        created_at__gte=timezone.now() - CHECK_RUN_STALE,  # one a dead process left is the sweep's, not in the way
    )
    mine = running.filter(agent=agent).order_by("created_at").first()
    if mine is not None:
        raise Conflict(
            "check_run_in_progress",
            f"This agent's checks are running ({mine.pk}); wait for that check run to finish.",
            details={"check_run": mine.pk},
        )
    if running.count() >= MAX_RUNNING_PER_PROJECT:
        raise Conflict(
            "check_run_in_progress",
            f"{MAX_RUNNING_PER_PROJECT} check runs of this project are running; start this one when one finishes.",
            details={"check_run": running.order_by("created_at").values_list("pk", flat=True).first()},
        )


def check_run_execute(check_run_id: str) -> CheckRun:
    """Runs every check of a running check run, `KAGENT_CHECK_CONCURRENCY` at a time, and records the outcome."""
    check_run = CheckRun.objects.select_related("agent").get(pk=check_run_id)
    if check_run.status != CheckRun.Status.RUNNING:
        return check_run
    checks = list(Check.objects.filter(agent=check_run.agent).order_by("created_at", "pk"))
    budget = _TurnBudget(TURN_BUDGET)
    concurrency = max(1, int(getattr(settings, "KAGENT_CHECK_CONCURRENCY", 4)))
    try:
        if concurrency == 1 or len(checks) <= 1:
            results = [_result_of(check_run, check, budget) for check in checks]
        else:
            with ThreadPoolExecutor(max_workers=min(concurrency, len(checks)), thread_name_prefix="check") as pool:
                results = list(pool.map(lambda check: _in_thread(check_run, check, budget), checks))
        status = CheckRun.Status.PASSED if all(result["passed"] for result in results) else CheckRun.Status.FAILED
    except Exception:  # never left running: failed, with what is known (the sweep ends one a dead process left)
        logger.exception("check run %s failed", check_run.pk)
        results, status = [_unfinished(check) for check in checks], CheckRun.Status.FAILED
    CheckRun.objects.filter(pk=check_run.pk, status=CheckRun.Status.RUNNING).update(
        results=results, status=status, finished_at=timezone.now()
    )
    check_run.refresh_from_db()
    return check_run


def _unfinished(check: Check) -> dict[str, Any]:
    return {"check": check.pk, "name": check.name, "passed": False, "problems": ["it did not finish"], "run": None}


def check_runs_expire(*, older_than: timedelta = CHECK_RUN_STALE) -> int:
    """Check runs still `running` long after any could finish (their process died): failed, each check unfinished."""
    stale = CheckRun.objects.filter(status=CheckRun.Status.RUNNING, created_at__lt=timezone.now() - older_than)
    ended = 0
    for check_run in stale.select_related("agent")[:100]:
        results = [_unfinished(check) for check in Check.objects.filter(agent=check_run.agent)]
        ended += CheckRun.objects.filter(pk=check_run.pk, status=CheckRun.Status.RUNNING).update(
            status=CheckRun.Status.FAILED, results=results, finished_at=timezone.now()
        )
    return ended


class _TurnBudget:
    """The customer turns a check run has left, shared by its checks' threads."""

    def __init__(self, turns: int) -> None:
        self.left = turns
        self._lock = threading.Lock()

    def take(self, turns: int) -> bool:
        with self._lock:
            if turns > self.left:
                return False
            self.left -= turns
            return True


def _in_thread(check_run: CheckRun, check: Check, budget: _TurnBudget) -> dict[str, Any]:
    close_old_connections()
    try:
        return _result_of(check_run, check, budget)
    finally:
        connection.close()  # this thread's own connection


def _result_of(check_run: CheckRun, check: Check, budget: _TurnBudget) -> dict[str, Any]:
    turns = check.input if isinstance(check.input, list) else [check.input]
    if not budget.take(len(turns)):
        problem = f"check_budget_exhausted: this check run played its {TURN_BUDGET} customer turns before this check"
        return {"check": check.pk, "name": check.name, "passed": False, "problems": [problem], "run": None}
    try:
        runs = _converse(check_run, check)
    except Exception as exc:  # a check that can't run fails, and says why; the others go on
        logger.exception("check %s of %s could not run", check.pk, check_run.pk)
        message = exc.message if isinstance(exc, ApiError) else "it could not run"
        return {"check": check.pk, "name": check.name, "passed": False, "problems": [message], "run": None}
    problems = check_problems(check, runs)
    if len(runs) < len(turns):
        problems.append(f"the conversation was handed to the team after turn {len(runs)} of {len(turns)}")
    return {"check": check.pk, "name": check.name, "passed": not problems, "problems": problems, "run": runs[-1].pk}


def _converse(check_run: CheckRun, check: Check) -> list[Run]:
    """The check's turns, one run each, in one test conversation; each run executed here (or waited for)."""
    agent = check_run.agent
    claim = None
    if check.end_user:
        # The customer's stored traits stay as they are (None): a check never rewrites a real customer's record.
        claim = EndUserClaim(external_id=check.end_user["external_id"], traits=None)
    session = panel_session_create(project=agent.project, agent_id=agent.pk, end_user=claim)
    turns = check.input if isinstance(check.input, list) else [check.input]
    runs: list[Run] = []
    for turn in turns:
        if runs and Session.objects.filter(pk=session.pk, status=Session.Status.HANDED_OFF).exists():
            break  # the team holds the conversation now: the check's later turns are for them (check_problems)
        run = run_create(
            project=agent.project,
            api_key=None,
            agent_id=agent.pk,
            text=str(turn),
            version=check_run.version,
            session_id=session.pk,
            sandbox=True,
            check_options={"check_run": check_run.pk, "check": check.pk, "client_outputs": check.client_outputs},
        )
        runs.append(_driven(run.pk))
    return runs


def _driven(run_id: str) -> Run:
    """The run, advanced here; when a worker took it first (its queue message), once that worker is done."""
    engine.run_execute(run_id)
    deadline = time.monotonic() + RUN_WAIT_S
    run = Run.objects.get(pk=run_id)
    while run.status not in SETTLED and time.monotonic() < deadline:
        time.sleep(0.2)
        run = Run.objects.get(pk=run_id)
    return run


def check_problems(check: Check, runs: list[Run]) -> list[str]:
    """What the check expected and the conversation didn't do, in plain words (empty: it passed)."""
    expect = check.expect or {}
    final = runs[-1]
    calls = ToolCall.objects.filter(run__in=[run.pk for run in runs], policy_decision="allowed")
    called = set(calls.values_list("name", flat=True))
    problems = [f"{name} was not called" for name in expect.get("tools_called", []) if name not in called]
    problems += [f"{name} was called" for name in expect.get("tools_not_called", []) if name in called]
    answer = str((final.output or {}).get("text") or "")
    folded = answer.casefold()
    problems += [
        f"the answer doesn't say {text!r}"
        for text in expect.get("output_contains", [])
        if text.casefold() not in folded
    ]
    problems += [
        f"the answer says {text!r}" for text in expect.get("output_not_contains", []) if text.casefold() in folded
    ]
    wanted = expect.get("status") or Run.Status.COMPLETED
    if final.status != wanted:
        ended = final.status
        if final.last_error:
            ended += f" ({final.last_error.get('code')})"
        problems.append(f"the run ended {ended}, not {wanted}")
    return problems
