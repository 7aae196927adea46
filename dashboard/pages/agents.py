"""Agents: the list, a new agent, the editor (instructions, model, variables, business hours, tool grants with the
built-ins' starter rules, client tools), the emergency switch, publishing, and the version history with its diff.

Every write parses with the API's own `Input` and calls the API's service, so the page refuses exactly what
`/v1/agents` refuses, with the same message, next to the field it is about.
"""

from __future__ import annotations

import zoneinfo
from functools import cache
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from agents import selectors, services
from agents.apis import AGENT_WRITE, PUBLISH
from agents.models import Agent
from dashboard import editor
from dashboard.access import MemberRequest, member_page
from dashboard.pages.panel import panel_context
from dashboard.problems import Problems, problems_from
from dashboard.tool_form import number_or_text
from kagent.errors import ApiError
from kagent.merge_patch import merge_patch_between
from kagent.secrets import secret_list
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
        **panel_context(request, agent),
    }
    context.update(extra)
    return context


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
    try:
        body = PUBLISH.parse({"note": request.POST.get("note", "")})
        version = services.agent_publish(agent=agent, note=body.note)
    except ApiError as exc:
        problems = problems_from(exc, ["$.note"])
        values = editor.values_from_config(
            name=agent.name,
            description=agent.description,
            config=agent.config,
            tools=_tools(request),
            servers=_servers(request),
        )
        context = _editor_context(request, agent, values, publish_problems=problems)
        return render(request, "dashboard/agent.html", context, status=422)
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
    context = {
        "agent": agent,
        "versions": versions,
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
