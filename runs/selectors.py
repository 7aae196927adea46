"""Reads for runs (a conversation's: conversations/selectors.py; the desk's: desk/selectors.py), with the same
visibility: a publishable key sees only what it created, and a verified end user's run only with that user's
`end_user_token`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db import connection
from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate

from agents.models import Agent, AgentVersion
from conversations.selectors import token_proves, visible
from kagent.errors import NotFound
from kagent.models import ApiKey, Project
from kagent.selectors import filter_given
from runs.models import Run, RunStep, ToolCall


def run_get(*, project: Project, run_id: str, key: ApiKey | None = None, end_user_token: str | None = None) -> Run:
    runs = Run.objects.filter(project=project, pk=run_id)
    if key is not None and not key.is_secret:
        runs = runs.filter(created_by_key=key)
    run = runs.select_related("end_user").first()
    if run is None or not token_proves(project, key, run.end_user, end_user_token):
        raise NotFound("No run with that id in this project.")
    return run


def run_steps(*, run: Run) -> tuple[list[RunStep], list[ToolCall]]:
    return list(run.steps.order_by("created_at", "pk")), list(run.tool_calls.order_by("round", "index"))


# --- lists with filters (the API's `GET /v1/runs`, `GET /v1/sessions` and the dashboard's pages) ------------------


def run_list(
    *,
    project: Project,
    key: ApiKey | None = None,
    end_user_token: str | None = None,
    agent_id: str | None = None,
    status: str | None = None,
    end_user: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    sandbox: bool | None = None,
    session_id: str | None = None,
) -> QuerySet[Run]:
    """The project's runs (a publishable key: only its own), filtered. `end_user` is the end user's external id;
    `sandbox` None: test-panel runs and customers' runs alike."""
    return filter_given(
        visible(Run.objects.filter(project=project), key, project, end_user_token).select_related("agent", "end_user"),
        agent_id=agent_id,
        status=status,
        end_user__external_id=end_user,
        created_at__gt=created_after,
        created_at__lt=created_before,
        sandbox=sandbox,
        session_id=session_id,
    )


def run_timeline(*, run: Run) -> list[RunStep | ToolCall]:
    """A run's steps in the order things happened: the model call of round r, then the tool calls it asked for
    (round r + 1, in the order asked), then the next model call."""
    steps, calls = run_steps(run=run)
    ordered: list[tuple[tuple[int, int, float], RunStep | ToolCall]] = [
        ((step.round, 0, step.created_at.timestamp()), step) for step in steps
    ]
    ordered += [((call.round - 1, 1, float(call.index)), call) for call in calls]
    ordered.sort(key=lambda pair: pair[0])
    return [item for _, item in ordered]


# --- activity ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DayActivity:
    """One day of a project's customers' runs and their tool calls (test-panel runs left out)."""

    day: date
    runs: int
    runs_failed: int
    tools_succeeded: int
    tools_failed: int
    tools_refused: int


def activity_by_day(*, project: Project, days: int, today: date) -> list[DayActivity]:
    """The last `days` days up to `today` (UTC), oldest first, every day present (zeros where nothing ran)."""
    first = today - timedelta(days=days - 1)
    since = datetime.combine(first, time.min, tzinfo=UTC)
    runs: dict[date, dict[str, int]] = {}
    for row in (
        Run.objects.filter(project=project, sandbox=False, created_at__gte=since)
        .annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values("day")
        .annotate(total=Count("pk"), failed=Count("pk", filter=Q(status=Run.Status.FAILED)))
    ):
        runs[row["day"]] = {"total": row["total"], "failed": row["failed"]}
    tools: dict[date, dict[str, int]] = {}
    for row in (
        ToolCall.objects.filter(project=project, run__sandbox=False, created_at__gte=since)
        .annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values("day")
        .annotate(
            succeeded=Count("pk", filter=Q(status=ToolCall.Status.SUCCEEDED)),
            failed=Count("pk", filter=Q(status=ToolCall.Status.FAILED)),
            refused=Count("pk", filter=Q(status=ToolCall.Status.REFUSED)),
        )
    ):
        tools[row["day"]] = {"succeeded": row["succeeded"], "failed": row["failed"], "refused": row["refused"]}
    out = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        run_counts, tool_counts = runs.get(day, {}), tools.get(day, {})
        out.append(
            DayActivity(
                day=day,
                runs=run_counts.get("total", 0),
                runs_failed=run_counts.get("failed", 0),
                tools_succeeded=tool_counts.get("succeeded", 0),
                tools_failed=tool_counts.get("failed", 0),
                tools_refused=tool_counts.get("refused", 0),
            )
        )
    return out


@dataclass(frozen=True)
class WaitingApproval:
    """A run waiting for a person's decision, with the calls it waits on (SPEC §5 "Approvals")."""

    run: Run
    calls: list[ToolCall]


def approvals_waiting(*, project: Project, include_tests: bool = False, limit: int = 100) -> list[WaitingApproval]:
    """Runs waiting for approval, the one waiting longest first (test-panel runs only when asked for)."""
    calls = (
        ToolCall.objects.filter(
            project=project, status=ToolCall.Status.AWAITING_APPROVAL, run__status=Run.Status.REQUIRES_ACTION
        )
        .select_related("run", "run__end_user", "run__agent", "run__session")
        .order_by("created_at", "run_id", "index")
    )
    if not include_tests:
        calls = calls.filter(run__sandbox=False)
    runs: dict[str, WaitingApproval] = {}
    for call in calls[: limit * 4]:
        if call.run_id not in runs:
            if len(runs) == limit:
                break
            runs[call.run_id] = WaitingApproval(call.run, [])
        runs[call.run_id].calls.append(call)
    return list(runs.values())


METRICS_DEFAULT_DAYS = 7


def version_metrics(*, agent: Agent, version: AgentVersion, since: datetime) -> dict[str, Any]:
    """A published version's figures since `since` (its runs, not the test panel's): runs, completed, failed,
    handoffs (transfer_to_human calls that handed over), tool_failures, unverified_claims (completed answers that
    kept a claim no tool confirmed), p50_ms (the median time to a completed answer)."""
    return versions_metrics(agent=agent, numbers=[version.number], since=since)[version.number]


def versions_metrics(*, agent: Agent, numbers: list[int], since: datetime) -> dict[int, dict[str, Any]]:
    """`version_metrics` of each of these versions, in three queries whatever their number (the versions page)."""
    runs = Run.objects.filter(agent=agent, version_number__in=numbers, sandbox=False, created_at__gte=since)
    counts = {
        row.pop("version_number"): row
        for row in runs.values("version_number").annotate(
            runs=Count("pk"),
            completed=Count("pk", filter=Q(status=Run.Status.COMPLETED)),
            failed=Count("pk", filter=Q(status=Run.Status.FAILED)),
            unverified_claims=Count(
                "pk", filter=Q(status=Run.Status.COMPLETED, output__unverified_claims__0__isnull=False)
            ),
        )
    }
    calls = ToolCall.objects.filter(run__in=runs.values("pk"))
    tool_counts = {
        row.pop("run__version_number"): row
        for row in calls.values("run__version_number").annotate(
            handoffs=Count("pk", filter=Q(name="transfer_to_human", status=ToolCall.Status.SUCCEEDED)),
            tool_failures=Count("pk", filter=Q(status=ToolCall.Status.FAILED)),
        )
    }
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT version_number, percentile_cont(0.5) WITHIN GROUP "
            "(ORDER BY EXTRACT(EPOCH FROM completed_at - created_at) * 1000) "
            "FROM runs_run WHERE agent_id = %s AND version_number = ANY(%s) AND NOT sandbox AND created_at >= %s "
            "AND status = %s AND completed_at IS NOT NULL GROUP BY version_number",
            [agent.pk, list(numbers), since, Run.Status.COMPLETED],
        )
        medians = dict(cursor.fetchall())
    none = {"runs": 0, "completed": 0, "failed": 0, "unverified_claims": 0}
    no_calls = {"handoffs": 0, "tool_failures": 0}
    return {
        number: {
            "agent": agent.pk,
            "version": number,
            "since": int(since.timestamp()),
            **counts.get(number, none),
            **tool_counts.get(number, no_calls),
            "p50_ms": None if medians.get(number) is None else round(medians[number]),
        }
        for number in numbers
    }
