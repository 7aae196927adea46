"""The desk (`/desk/`): the inbox of conversations the team holds (SPEC §4 "Live handoff"; the longest-waiting
customer first), open handoffs, tickets (close, reopen), flagged conversations, each linking to its conversation
(dashboard/pages/conversations.py), and a small chart of the last 30 days. Test-panel objects only when asked for,
marked as tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.db.models import F, JSONField, OuterRef, QuerySet, Subquery
from django.db.models.functions import JSONObject, Left
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from conversations import selectors as sessions
from conversations.models import Message, Session
from dashboard.access import MemberRequest, member_page
from dashboard.chart import activity_chart
from desk import selectors as desk_selectors
from desk import services as desk_services
from desk.apis import HANDOFF_UPDATE, TICKET_UPDATE
from kagent.api import param_bool, param_choice
from kagent.errors import ApiError
from kagent.models import Project
from runs import approvals, selectors
from runs.apis.actions import APPROVE_TOOL_CALLS
from runs.models import Run

CHART_DAYS = 30
INBOX_SIZE = 100
LAST_MESSAGE_CHARS = 300


def inbox(*, project: Project, include_tests: bool) -> QuerySet[Session]:
    """The conversations the team holds (`handed_off`), the customer who has waited longest for an answer first
    (`waiting_since`, the `session_team_inbox` index), then those answered, the earliest handed off first; each
    with its last message (`last_message`: role, author, the start of its content)."""
    last = Message.objects.filter(session=OuterRef("pk")).order_by("-created_at", "-pk")
    said = JSONObject(role="role", author="author", content=Left("content", LAST_MESSAGE_CHARS))
    return (
        sessions.session_list(project=project, status=Session.Status.HANDED_OFF, include_tests=include_tests)
        .annotate(last_message=Subquery(last.values(said=said)[:1], output_field=JSONField()))
        .order_by(F("waiting_since").asc(nulls_last=True), F("handed_off_at").asc(nulls_last=True), "pk")
    )


@member_page("GET")
def desk(request: MemberRequest) -> HttpResponse:
    try:
        include_tests = bool(param_bool(request.GET, "include_tests"))
        ticket_status = param_choice(request.GET, "tickets", ("open", "closed", "all")) or "open"
    except ApiError:
        include_tests, ticket_status = False, "open"
    project = request.project
    days = selectors.activity_by_day(project=project, days=CHART_DAYS, today=timezone.now().date())
    context = {
        "include_tests": include_tests,
        "ticket_status": ticket_status,
        "approvals": selectors.approvals_waiting(project=project, include_tests=include_tests),
        "inbox": inbox(project=project, include_tests=include_tests)[:INBOX_SIZE],
        "handoffs": desk_selectors.handoff_list(project=project, status="open", include_tests=include_tests)
        .select_related("session")
        .order_by("-created_at")[:100],
        "tickets": desk_selectors.ticket_list(
            project=project, status=None if ticket_status == "all" else ticket_status, include_tests=include_tests
        ).order_by("-created_at")[:100],
        "flagged": sessions.session_list(project=project, flagged=True, include_tests=include_tests).order_by(
            "-flagged_at"
        )[:100],
        "chart": activity_chart(days),
        "totals": {
            "runs": sum(d.runs for d in days),
            "failed": sum(d.runs_failed for d in days),
            "tools": sum(d.tools_succeeded + d.tools_failed + d.tools_refused for d in days),
            "refused": sum(d.tools_refused for d in days),
        },
    }
    return render(request, "dashboard/desk.html", context)


def _back(request: MemberRequest) -> HttpResponse:
    query = request.POST.get("back", "")
    return redirect(f"/desk/?{query}" if query and "\n" not in query else "/desk/")


def _status_change(
    request: MemberRequest, *, parse: Callable[[dict[str, str]], Any], change: Callable[[str], Any], row: str, key: str
) -> HttpResponse:
    """Close or reopen a desk object with the API's input and service; the row swapped in place (htmx)."""
    try:
        body = parse({"status": request.POST.get("status", "")})
        changed = change(body.status)
    except ApiError as exc:
        messages.error(request, exc.message)
        return _back(request)
    if request.htmx:
        return render(request, row, {key: changed, "just_changed": True})
    return _back(request)


@member_page("POST")
def ticket_update(request: MemberRequest, ticket_id: str) -> HttpResponse:
    """Close or reopen a ticket, as `PATCH /v1/tickets/{id}` does."""
    ticket = desk_selectors.ticket_get(project=request.project, ticket_id=ticket_id)
    return _status_change(
        request,
        parse=lambda data: TICKET_UPDATE.parse(data, partial=True),
        change=lambda status: desk_services.ticket_update(ticket=ticket, status=status),
        row="dashboard/_ticket_row.html",
        key="ticket",
    )


@member_page("POST")
def handoff_update(request: MemberRequest, handoff_id: str) -> HttpResponse:
    """Close a handoff once the team has the conversation, as `PATCH /v1/handoffs/{id}` does."""
    handoff = desk_selectors.handoff_get(project=request.project, handoff_id=handoff_id)
    return _status_change(
        request,
        parse=lambda data: HANDOFF_UPDATE.parse(data, partial=True),
        change=lambda status: desk_services.handoff_update(handoff=handoff, status=status),
        row="dashboard/_handoff_row.html",
        key="handoff",
    )


# --- approvals (SPEC §5 "Approvals") -----------------------------------------------------------------------------


def decide_from_post(request: MemberRequest, run: Run) -> str:
    """The person's decision on every call `run` waits for, from the form (`decision`: approve | deny, for all of
    them; `scope`: once | session; `note`), through the API's own service. Returns what to tell them; raises
    ApiError as the API would."""
    decision = request.POST.get("decision", "")
    scope = "session" if request.POST.get("scope") == "session" else "once"
    note = request.POST.get("note", "").replace("\r\n", "\n").strip()
    # Exactly the calls the page showed: a call that started waiting since (the run went on and asked again) is
    # not decided unseen; the service refuses the decision then (decisions_incomplete).
    shown = request.POST.getlist("call_id")
    body = APPROVE_TOOL_CALLS.parse(
        {"decisions": [{"call_id": call_id, "decision": decision, "scope": scope, "note": note} for call_id in shown]}
    )
    user = request.user
    decided_by = approvals.DecidedBy("member", str(user.pk), getattr(user, "name", "") or user.email)
    approvals.run_approve_tool_calls(
        run=run,
        decisions=[
            approvals.ApprovalDecision(d["call_id"], d["decision"], d.get("scope", "once"), d.get("note", ""))
            for d in body.decisions
        ],
        decided_by=decided_by,
    )
    if decision == "approve":
        return "Approved: the agent goes on and the action runs now."
    return "Denied: nothing was done, and the agent tells the customer."


@member_page("POST")
def approval_decide(request: MemberRequest, run_id: str) -> HttpResponse:
    run = selectors.run_get(project=request.project, run_id=run_id)
    try:
        messages.success(request, decide_from_post(request, run))
    except ApiError as exc:
        messages.error(request, exc.message)
    return _back(request)
