"""Agents: the list, a new agent, the editor (instructions, model, variables, business hours, tool grants with the
built-ins' starter rules, client tools), the emergency switch, publishing, and the version history with its diff.

Every write parses with the API's own `Input` and calls the API's service, so the page refuses exactly what
`/v1/agents` refuses, with the same message, next to the field it is about.
"""

from __future__ import annotations

import zoneinfo
from datetime import timedelta
from functools import cache
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone

from agents import selectors, services
from agents.apis import AGENT_WRITE
from agents.models import Agent
from checks import selectors as check_selectors
from checks import services as checks
from checks.apis import CHECK_WRITE, PUBLISH, check_fields
from checks.models import CheckRun
from dashboard import editor
from dashboard.access import MemberRequest, member_page
from dashboard.pages.panel import panel_context
from dashboard.problems import Problems, problems_from
from dashboard.tool_form import number_or_text
from kagent import throttle
from kagent.errors import ApiError
from kagent.merge_patch import merge_patch_between
from kagent.secrets import secret_list
from runs import selectors as run_selectors
from tools.selectors import http_tool_list, mcp_server_list


@cache
def time_zones() -> list[str]:
    return sorted(zoneinfo.available_timezones())


@member_page("GET")
def agent_list(request: MemberRequest) -> HttpResponse:
    agents = list(selectors.agent_list(project=request.project).order_by("name"))
    changed = selectors.agents_with_unpublished_changes(project=request.project, agents=agents)
    rows = [{"agent": agent, "changed": agent.pk in changed} for agent in agents]
    return render(request, "dashboard/agents.html", {"rows": rows})


NEW_AGENT_FIELDS = ("$.name", "$.description", "$.instructions")


def _config_relative(path: str) -> str:
    return "$" + path.removeprefix("$.config") if path.startswith("$.config") else path


@member_page("GET", "POST")
def agent_new(request: MemberRequest) -> HttpResponse:
    values = {"name": "", "description": "", "instructions": ""}
    problems = Problems()
    if request.method == "POST":
        values = {key: request.POST.get(f"$.{key}", "").replace("\r\n", "\n") for key in values}
        try:
            body = AGENT_WRITE.parse(
                {
                    "name": values["name"],
                    "description": values["description"],
                    "config": {"instructions": values["instructions"]},
                }
            )
            agent = services.agent_create(
                project=request.project,
                name=body.name,
                description=body.description,
                config=body.config,
                actions_paused=body.actions_paused,
            )
        except ApiError as exc:
            problems = problems_from(exc, NEW_AGENT_FIELDS, translate=_config_relative)
        else:
            messages.success(request, f"{agent.name} is created. Grant it tools, try it in the test panel, publish.")
            return redirect("dashboard:agent", agent_id=agent.pk)
    status = 422 if problems else 200
    return render(request, "dashboard/agent_new.html", {"values": values, "problems": problems}, status=status)


def _editor_context(request: MemberRequest, agent: Agent, values: editor.EditorValues, **extra: Any) -> dict[str, Any]:
    secret_names = [secret.name for secret in secret_list(project=request.project).order_by("name")]
    if values.model["api_key_secret"] and values.model["api_key_secret"] not in secret_names:
        secret_names.append(values.model["api_key_secret"])
    changed = selectors.agents_with_unpublished_changes(project=request.project, agents=[agent])
    context = {
        "agent": agent,
        "values": values,
        "problems": Problems(),
        "publish_problems": Problems(),
        "secret_names": secret_names,
        "providers": editor.PROVIDERS,
        "days": editor.DAYS,
        "effects": editor.EFFECTS,
        "time_zones": time_zones(),
        "unpublished": agent.pk in changed,
        **_checks_context(agent),
        "check_problems": Problems(),
        **panel_context(request, agent),
    }
    context.update(extra)
    return context


def _checks_context(agent: Agent) -> dict[str, Any]:
    return {
        "checks": list(check_selectors.check_list(agent=agent).order_by("created_at", "pk")),
        "last_check_run": CheckRun.objects.filter(agent=agent).order_by("-created_at", "-pk").first(),
    }


def _back_to_checks(agent: Agent) -> HttpResponse:
    return redirect(reverse("dashboard:agent", kwargs={"agent_id": agent.pk}) + "#checks")


def _tools(request: MemberRequest) -> list[Any]:
    return list(http_tool_list(project=request.project).order_by("name"))


def _servers(request: MemberRequest) -> list[Any]:
    return list(mcp_server_list(project=request.project).order_by("name"))


@member_page("GET", "POST")
def agent_detail(request: MemberRequest, agent_id: str) -> HttpResponse:
    """The editor: GET shows the draft; POST saves it whole (or, without JavaScript, adds a tool's starter rules)."""
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    tools, servers = _tools(request), _servers(request)
    if request.method == "GET":
        values = editor.values_from_config(
            name=agent.name, description=agent.description, config=agent.config, tools=tools, servers=servers
        )
        return render(request, "dashboard/agent.html", _editor_context(request, agent, values))

    values = editor.values_from_post(request.POST, config=agent.config, tools=tools, servers=servers)
    action = request.POST.get("action", "save")
    if action.startswith("starter:"):
        values = editor.with_starter_rules(values, action.removeprefix("starter:"))
        messages.info(request, "Starter rules added below. Read why each is there, then Save to keep them.")
        return render(request, "dashboard/agent.html", _editor_context(request, agent, values))

    config, problems = editor.config_from_values(values, config=agent.config)
    if not problems:
        try:
            body = AGENT_WRITE.parse(
                {"name": values.name, "description": values.description, "config": config}, partial=True
            )
            services.agent_update(
                agent=agent,
                name=body.name,
                description=body.description,
                config_patch=merge_patch_between(agent.config, body.config),
            )
        except ApiError as exc:
            problems = problems_from(exc, values.field_paths, translate=values.translate)
        else:
            messages.success(request, "Saved. The test panel uses this draft now; publish to make it live.")
            return redirect("dashboard:agent", agent_id=agent.pk)
    context = _editor_context(request, agent, values, problems=problems)
    return render(request, "dashboard/agent.html", context, status=422)


@member_page("POST")
def agent_actions_paused(request: MemberRequest, agent_id: str) -> HttpResponse:
    """The emergency switch: applies at once to every version, without publishing."""
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    body = AGENT_WRITE.parse({"actions_paused": request.POST.get("actions_paused") == "on"}, partial=True)
    agent = services.agent_update(agent=agent, actions_paused=body.actions_paused)
    if request.htmx:
        return render(request, "dashboard/_actions_paused.html", {"agent": agent, "just_changed": True})
    messages.success(request, "Actions are paused." if agent.actions_paused else "Actions are back on.")
    return redirect("dashboard:agent", agent_id=agent.pk)


@member_page("POST")
def agent_publish(request: MemberRequest, agent_id: str) -> HttpResponse:
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    failures: list[dict[str, Any]] = []
    try:
        body = PUBLISH.parse({"note": request.POST.get("note", ""), "force": request.POST.get("force") == "on"})
        version = checks.publish_checked(agent=agent, note=body.note, force=body.force)
    except ApiError as exc:
        problems = problems_from(exc, ["$.note"])
        if exc.code == "checks_failed" and isinstance(exc.details, dict):
            failures = list(exc.details.get("failures") or [])
        values = editor.values_from_config(
            name=agent.name,
            description=agent.description,
            config=agent.config,
            tools=_tools(request),
            servers=_servers(request),
        )
        context = _editor_context(
            request,
            agent,
            values,
            publish_problems=problems,
            check_failures=failures,
            publish_note=request.POST.get("note", ""),
        )
        return render(request, "dashboard/agent.html", context, status=409 if failures else 422)
    if version.forced:
        messages.warning(
            request, f"Published version {version.number} although {len(version.check_failures)} check(s) failed."
        )
    else:
        agent.refresh_from_db(fields=["traffic"])
        if agent.traffic:
            messages.success(
                request, f"Published version {version.number}. Runs follow the traffic split until you change it."
            )
        else:
            messages.success(request, f"Published version {version.number}. Runs without a pinned version use it now.")
    return redirect("dashboard:agent-versions", agent_id=agent.pk)


@member_page("POST")
def agent_delete(request: MemberRequest, agent_id: str) -> HttpResponse:
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    services.agent_delete(agent=agent)
    messages.success(request, f"{agent.name} is deleted. Runs it made stay in the runs inspector.")
    return redirect("dashboard:agents")


def _version_number(raw: str | None) -> int | None | str:
    """A compare field's value: a version number, None for the draft, or "" when not given."""
    if raw is None or raw == "":
        return ""
    if raw == "draft":
        return None
    number = number_or_text(raw)  # never int() of "²" or of thousands of digits
    return number if isinstance(number, int) else ""


@member_page("GET")
def agent_versions(request: MemberRequest, agent_id: str) -> HttpResponse:
    """The version history, and what changed between any two versions (or a version and the draft)."""
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    versions = list(selectors.version_list(agent=agent).order_by("-number"))
    before, after = _version_number(request.GET.get("from")), _version_number(request.GET.get("to"))
    if before == "" and after == "" and versions:
        # By default: what the draft changes since the latest version (or what the latest changed, if nothing).
        before, after = versions[0].number, None
        if not selectors.version_diff(agent=agent, before=before, after=None).changes and len(versions) > 1:
            before, after = versions[1].number, versions[0].number
    diff = None
    if before != "" and after != "":
        assert not isinstance(before, str) and not isinstance(after, str)
        diff = selectors.version_diff(agent=agent, before=before, after=after)
    since = timezone.now() - timedelta(days=run_selectors.METRICS_DEFAULT_DAYS)
    weights = {entry["version"]: entry["weight"] for entry in agent.traffic or []}
    figures = run_selectors.versions_metrics(agent=agent, numbers=[v.number for v in versions], since=since)
    rows = [
        {"version": version, "weight": weights.get(version.number, 0), "figures": figures[version.number]}
        for version in versions
    ]
    context = {
        "agent": agent,
        "versions": versions,
        "rows": rows,
        "diff": diff,
        "compare_from": "draft" if before is None else before,
        "compare_to": "draft" if after is None else after,
        "publish_problems": Problems(),
    }
    return render(request, "dashboard/agent_versions.html", context)


@member_page("POST")
def agent_version_restore(request: MemberRequest, agent_id: str, number: int) -> HttpResponse:
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    version = selectors.version_get(agent=agent, number=number)
    services.agent_restore_version(agent=agent, version=version)
    messages.success(
        request,
        f"The draft is version {number}'s config again. Check it in the test panel, then publish to make it live.",
    )
    return redirect(reverse("dashboard:agent", kwargs={"agent_id": agent.pk}))


# --- checks (SPEC §4 "Checks and traffic") -----------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace(",", "\n").splitlines() if line.strip()]


@member_page("POST")
def agent_check_add(request: MemberRequest, agent_id: str) -> HttpResponse:
    """A check from the form: the customer's message(s), what the answer must say, the tools it must call."""
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    post = request.POST
    turns = [line for line in post.get("input", "").replace("\r\n", "\n").split("\n") if line.strip()]
    expect: dict[str, Any] = {}
    for key in ("output_contains", "output_not_contains", "tools_called", "tools_not_called"):
        values = (
            _lines(post.get(key, ""))
            if key.startswith("tools")
            else [line.strip() for line in post.get(key, "").replace("\r\n", "\n").split("\n") if line.strip()]
        )
        if values:
            expect[key] = values
    try:
        body = CHECK_WRITE.parse(
            {
                "name": post.get("name", "").strip(),
                "input": turns[0] if len(turns) == 1 else turns,
                "expect": expect,
                **({"end_user": {"external_id": post["customer"].strip()}} if post.get("customer", "").strip() else {}),
            },
            partial=True,
        )
        checks.check_create(agent=agent, fields=check_fields(agent, body, creating=True))
    except ApiError as exc:
        messages.error(request, f"The check was not added: {exc.message}")
    else:
        messages.success(request, "Check added. Run the checks to see it pass.")
    return _back_to_checks(agent)


@member_page("POST")
def agent_check_from_run(request: MemberRequest, agent_id: str, run_id: str) -> HttpResponse:
    """A check made from a test-panel answer: its message, its customer, the tools it called."""
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    try:
        checks.check_create(agent=agent, fields=checks.check_from_run(agent=agent, run_id=run_id, name=None))
    except ApiError as exc:
        messages.error(request, f"The check was not added: {exc.message}")
    else:
        messages.success(request, "Kept as a check: the same message must call the same tools again.")
    return _back_to_checks(agent)


@member_page("POST")
def agent_check_delete(request: MemberRequest, agent_id: str, check_id: str) -> HttpResponse:
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    check_selectors.check_get(agent=agent, check_id=check_id).delete()
    messages.success(request, "Check deleted.")
    return _back_to_checks(agent)


@member_page("POST")
def agent_checks_run(request: MemberRequest, agent_id: str) -> HttpResponse:
    """Starts every check against the draft on a worker, as `POST …/checks/run` does: the page doesn't wait, the
    checks' card follows the run (`agent_checks`) until its results are in."""
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    try:
        throttle.dashboard_action(request.project.pk, request.user.pk)
        check_run = checks.check_run_start(agent=agent, version=None)
    except ApiError as exc:
        messages.error(request, exc.message)
    else:
        if check_run.status == CheckRun.Status.RUNNING:
            messages.info(request, "The checks are running on the draft: their results appear below when done.")
        else:
            messages.success(request, "No checks to run yet.")
    return _back_to_checks(agent)


@member_page("GET")
def agent_checks(request: MemberRequest, agent_id: str) -> HttpResponse:
    """The checks' card as it is now: what the agent page asks for every 2 s while a check run is running."""
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    return render(request, "dashboard/_checks.html", {"agent": agent, **_checks_context(agent)})


# --- traffic and rollback ----------------------------------------------------------------------------------------


@member_page("POST")
def agent_traffic(request: MemberRequest, agent_id: str) -> HttpResponse:
    """The split of runs over published versions (weights per version), or none (`clear`)."""
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    traffic: list[dict[str, Any]] | None = None
    if request.POST.get("action") != "clear":
        traffic = []
        for version in selectors.version_list(agent=agent):
            weight = number_or_text(request.POST.get(f"weight.{version.number}", "").strip() or "0")
            if weight != 0:
                traffic.append({"version": version.number, "weight": weight})
    try:
        body = AGENT_WRITE.parse({"traffic": traffic}, partial=True)
        services.agent_update(agent=agent, traffic=body.traffic)
    except ApiError as exc:
        messages.error(request, f"The split was not changed: {exc.message}")
    else:
        messages.success(
            request, "The split applies to the next runs." if traffic else "No split: runs use the latest version."
        )
    return redirect("dashboard:agent-versions", agent_id=agent.pk)


@member_page("POST")
def agent_rollback(request: MemberRequest, agent_id: str, number: int) -> HttpResponse:
    agent = selectors.agent_get(project=request.project, agent_id=agent_id)
    try:
        services.agent_rollback(agent=agent, version=number)
    except ApiError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Rolled back: every run that pins no version runs version {number} now.")
    return redirect("dashboard:agent-versions", agent_id=agent.pk)
