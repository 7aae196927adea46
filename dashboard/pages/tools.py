"""HTTP tools (`/tools/`): the list, the editor, a preview of the rendered request for sample arguments and a
sample customer (secrets masked) that follows the form as it is typed, and a live test call through the hardened
client. Saving, previewing and testing parse with the API's inputs and call its services (`/v1/tools…`,
`/v1/tool_drafts/…`): the form as it stands is a definition not yet saved, checked as a write would check it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render

from agents.selectors import agent_list, agents_granting_mcp_server, agents_granting_tool
from dashboard import tool_form
from dashboard.access import MemberRequest, member_page
from dashboard.problems import Problems, problems_from
from kagent import throttle
from kagent.errors import ApiError
from kagent.merge_patch import merge_patch_between
from tools import selectors, services
from tools.apis import HTTP_TOOL_WRITE, TOOL_SAMPLE
from tools.models import HttpTool
from tools.resources import TOOL_PREVIEW, TOOL_TEST_CALL

SAMPLE_PATHS = {"$.end_user": "$.sample.customer", "$.variables": "$.sample.variables"}


@member_page("GET")
def tool_list(request: MemberRequest) -> HttpResponse:
    tools = list(selectors.http_tool_list(project=request.project).order_by("name"))
    names = {agent.pk: agent.name for agent in agent_list(project=request.project)}
    rows = [
        {
            "tool": tool,
            "host": tool.config.get("url", "").removeprefix("https://").split("/", 1)[0],
            "agents": [names[a] for a in agents_granting_tool(project=request.project, name=tool.name) if a in names],
        }
        for tool in tools
    ]
    servers = [
        {
            "server": server,
            "grantable": sum(1 for tool in server.tools if tool.get("grantable")),
            "agents": [
                names[a] for a in agents_granting_mcp_server(project=request.project, name=server.name) if a in names
            ],
        }
        for server in selectors.mcp_server_list(project=request.project).order_by("name")
    ]
    return render(request, "dashboard/tools.html", {"rows": rows, "servers": servers})


def _context(
    request: MemberRequest, values: tool_form.ToolValues, tool: HttpTool | None, **extra: Any
) -> dict[str, Any]:
    context: dict[str, Any] = {
        "tool": tool,
        "values": values,
        "problems": Problems(),
        "methods": tool_form.METHODS,
        "labels": tool_form.LABELS,
        "preview": None,
        "preview_problems": Problems(),
        "test": None,
        "used_by": [],
    }
    if tool is not None:
        names = {agent.pk: agent.name for agent in agent_list(project=request.project)}
        granted = agents_granting_tool(project=request.project, name=tool.name)
        context["used_by"] = [{"id": a, "name": names[a]} for a in granted if a in names]
    context.update(extra)
    return context


def _save(request: MemberRequest, tool: HttpTool | None, values: tool_form.ToolValues) -> HttpTool:
    definition, problems = tool_form.definition_from_values(values)
    if problems:
        raise _FormProblems(problems)
    if tool is None:
        body = HTTP_TOOL_WRITE.parse(definition)
        return services.http_tool_create(
            project=request.project,
            name=body.name,
            description=body.description,
            effect=body.effect,
            requires_verified_user=body.requires_verified_user,
            config=body.config,
        )
    body = HTTP_TOOL_WRITE.parse(definition, partial=True)
    return services.http_tool_update(
        tool=tool,
        description=body.description,
        effect=body.effect,
        requires_verified_user=body.requires_verified_user,
        config_patch=merge_patch_between(tool.config, body.config),
    )


class _FormProblems(Exception):
    def __init__(self, problems: Problems) -> None:
        self.problems = problems


def _tool_page(request: MemberRequest, tool: HttpTool | None) -> HttpResponse:
    if request.method == "GET":
        values = tool_form.values_from_tool(tool) if tool is not None else tool_form.ToolValues()
        return render(request, "dashboard/tool.html", _context(request, values, tool))
    values = tool_form.values_from_post(request.POST)
    if tool is not None:
        values.name = tool.name  # a tool's name can't change: agents grant it by name
    action = request.POST.get("action", "save")
    if action in ("preview", "test"):
        # Without JavaScript the buttons post the whole form here: the page comes back with the result.
        return render(
            request, "dashboard/tool.html", _context(request, values, tool, **_trial(request, values, action))
        )
    try:
        saved = _save(request, tool, values)
    except _FormProblems as exc:
        problems = exc.problems
    except ApiError as exc:
        problems = problems_from(exc, tool_form.FIELD_PATHS)
    else:
        messages.success(request, f"Saved {saved.name}. Agents get the change when they are published again.")
        return redirect("dashboard:tool", name=saved.name)
    return render(request, "dashboard/tool.html", _context(request, values, tool, problems=problems), status=422)


@member_page("GET", "POST")
def tool_new(request: MemberRequest) -> HttpResponse:
    return _tool_page(request, None)


@member_page("GET", "POST")
def tool_detail(request: MemberRequest, name: str) -> HttpResponse:
    return _tool_page(request, selectors.http_tool_get(project=request.project, name=name))


def _trial(request: MemberRequest, values: tool_form.ToolValues, action: str) -> dict[str, Any]:
    """The preview (or the test call) of the form as it stands: {"preview"|"test": rendered, "preview_problems"}."""
    definition, problems = tool_form.definition_from_values(values)
    sample_body, sample_problems = tool_form.sample_body(values)
    problems.by_path.update(sample_problems.by_path)
    if problems:
        return {"preview_problems": problems}
    try:
        sample = TOOL_SAMPLE.parse(sample_body).sample()
        checked = services.http_tool_check(project=request.project, definition=definition)
        if action == "test":
            throttle.dashboard_action(request.project.pk, request.user.pk)
    except ApiError as exc:
        known = [*tool_form.FIELD_PATHS, "$.sample.customer", "$.sample.variables", "$.sample.traits"]
        return {"preview_problems": problems_from(exc, known, translate=lambda p: SAMPLE_PATHS.get(p, p))}
    if action == "test":
        outcome = services.http_tool_test_call(project=request.project, definition=checked, sample=sample)
        return {"test": TOOL_TEST_CALL.render(outcome)}
    preview = services.http_tool_preview(project=request.project, definition=checked, sample=sample)
    return {"preview": TOOL_PREVIEW.render(preview)}


@member_page("POST")
def tool_preview(request: MemberRequest) -> HttpResponse:
    """The preview panel, for the form as it stands (htmx, as you type)."""
    values = tool_form.values_from_post(request.POST)
    return render(request, "dashboard/_tool_preview.html", {"values": values, **_trial(request, values, "preview")})


@member_page("POST")
def tool_test_call(request: MemberRequest) -> HttpResponse:
    values = tool_form.values_from_post(request.POST)
    return render(request, "dashboard/_tool_test.html", {"values": values, **_trial(request, values, "test")})


@member_page("POST")
def tool_samples(request: MemberRequest) -> HttpResponse:
    """The sample argument fields, one per declared parameter (htmx, when the parameters change)."""
    values = tool_form.values_from_post(request.POST)
    return render(request, "dashboard/_tool_samples.html", {"values": values, "preview_problems": Problems()})


@member_page("POST")
def tool_delete(request: MemberRequest, name: str) -> HttpResponse:
    tool = selectors.http_tool_get(project=request.project, name=name)
    try:
        services.http_tool_delete(tool=tool, granted_by=agents_granting_tool(project=request.project, name=name))
    except ApiError as exc:
        values = tool_form.values_from_tool(tool)
        problems = Problems()
        problems.add("$", exc.message)
        return render(request, "dashboard/tool.html", _context(request, values, tool, problems=problems), status=409)
    messages.success(request, f"Deleted {name}. Published versions keep their copy of it.")
    return redirect("dashboard:tools")
