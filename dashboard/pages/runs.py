"""The runs inspector (`/runs/`): the project's runs filtered as `GET /v1/runs` filters them; a run's page with every
round, tool call, policy decision, timing and upstream detail (secrets masked), live while it works; cancel. A run's
conversation has its own page (dashboard/pages/conversations.py)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render

from agents.selectors import agent_list
from dashboard.access import MemberRequest, member_page
from dashboard.pages.panel import step_views
from dashboard.problems import Problems
from kagent.errors import ApiError
from kagent.streams import StreamPlaces, resume_after
from kagent.throttle import RateLimited
from runs import lifecycle, run_events, selectors, streams
from runs.apis.create import run_filters
from runs.models import Run

PAGE_SIZE = 50
FILTER_PARAMS = ("agent", "status", "end_user", "created_after", "created_before", "sandbox")


def page_of(request: HttpRequest, queryset: QuerySet[Any], size: int = PAGE_SIZE) -> tuple[list[Any], str | None]:
    """Newest first, `size` rows from the `cursor` query parameter on (the last id of the page before), and the
    cursor of the next page."""
    cursor = request.GET.get("cursor", "")
    queryset = queryset.order_by("-pk")
    if cursor:
        queryset = queryset.filter(pk__lt=cursor)
    rows: list[Model] = list(queryset[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return rows, (str(rows[-1].pk) if more and rows else None)


def next_page_query(request: HttpRequest, cursor: str | None) -> str | None:
    if cursor is None:
        return None
    query = request.GET.copy()
    query["cursor"] = cursor
    return query.urlencode()


@member_page("GET")
def run_list(request: MemberRequest) -> HttpResponse:
    problems = Problems()
    runs: list[Run] = []
    cursor = None
    try:
        filters = run_filters(request.GET)
    except ApiError as exc:
        # The parameter the message names gets it (every filter message starts with its name).
        name = exc.message.split(" ", 1)[0]
        problems.add(f"$.{name}" if name in FILTER_PARAMS else "$", exc.message)
    else:
        runs, cursor = page_of(request, selectors.run_list(project=request.project, **filters))
    context = {
        "runs": runs,
        "agents": agent_list(project=request.project).order_by("name"),
        "statuses": [s.value for s in Run.Status],
        "query": request.GET,
        "problems": problems,
        "next_query": next_page_query(request, cursor),
    }
    return render(request, "dashboard/runs.html", context, status=422 if problems else 200)


def _run_context(request: MemberRequest, run: Run) -> dict[str, Any]:
    lifecycle.run_expire_if_due(run=run)
    last_event = run_events.followed_from(run)
    return {
        "run": run,
        "steps": step_views(run),
        "active": run.status in Run.ACTIVE,
        "hidden_content": not run.store and run.purged_at is None,
        "last_event": last_event,
        "written": run_events.written_so_far(run.pk) if last_event and run.store else "",
    }


@member_page("GET")
def run_detail(request: MemberRequest, run_id: str) -> HttpResponse:
    run = selectors.run_get(project=request.project, run_id=run_id)
    return render(request, "dashboard/run.html", _run_context(request, run))


@member_page("GET")
def run_timeline(request: MemberRequest, run_id: str) -> HttpResponse:
    """The run's status and steps, fetched again on each of its events while it works."""
    run = selectors.run_get(project=request.project, run_id=run_id)
    return render(request, "dashboard/_run_live.html", _run_context(request, run))


@member_page("GET")
def run_events_stream(request: MemberRequest, run_id: str) -> HttpResponseBase:
    """The run's events (Server-Sent Events, as `GET /v1/runs/{id}/events` for the secret key): the runs inspector
    and the test panel refresh on them (static/dashboard/app.js)."""
    run = selectors.run_get(project=request.project, run_id=run_id)
    after = resume_after(request)
    try:
        places = StreamPlaces.take(request, f"member:{request.user.pk}")
    except RateLimited as exc:  # the page refreshes every few seconds instead
        return HttpResponse(exc.message, status=429, headers=exc.headers, content_type="text/plain")
    return streams.event_stream(run, places, after=after, full_steps=True)


@member_page("POST")
def run_cancel(request: MemberRequest, run_id: str) -> HttpResponse:
    run = selectors.run_get(project=request.project, run_id=run_id)
    try:
        run = lifecycle.run_cancel(run=run, reason="requested")
    except ApiError as exc:
        messages.error(request, exc.message)
    else:
        if run.status == Run.Status.CANCELLED:
            messages.success(request, "The run is cancelled.")
        else:
            messages.success(request, "Cancelling: the run stops at its next step.")
    if request.htmx:
        return render(request, "dashboard/_run_live.html", _run_context(request, run))
    return redirect("dashboard:run", run_id=run.pk)
