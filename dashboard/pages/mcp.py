"""MCP servers (`/tools/mcp/…`, SPEC §6 "MCP servers"): add one (its tools are listed through the protected client
before anything is saved), see the tools it listed and which can't be granted and why, list them again, change or
delete it. The same input and services as `/v1/mcp_servers`; tools are granted to an agent in its editor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from agents.selectors import agent_list, agents_granting_mcp_server
from dashboard.access import MemberRequest, member_page
from dashboard.problems import Problems, problems_from
from dashboard.tool_form import text_pairs
from kagent import throttle
from kagent.errors import ApiError
from tools import selectors, services
from tools.apis import MCP_SERVER_WRITE
from tools.models import McpServer

FIELDS = ("$.name", "$.url", "$.headers")
HEADER_PREFIX = "$.headers"  # the names of the header rows (dashboard/_mcp_header_row.html)


@dataclass
class ServerValues:
    """What the form's fields hold, as typed."""

    name: str = ""
    url: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def of(cls, server: McpServer) -> ServerValues:
        return cls(server.name, server.url, list(server.headers.items()))

    @classmethod
    def posted(cls, request: HttpRequest) -> ServerValues:
        post = request.POST
        return cls(
            name=post.get("$.name", "").strip(),
            url=post.get("$.url", "").strip(),
            headers=text_pairs(post, f"{HEADER_PREFIX}.name", f"{HEADER_PREFIX}.value"),
        )

    def body(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "headers": dict(self.headers)}


def _used_by(request: MemberRequest, server: McpServer) -> list[dict[str, str]]:
    names = {agent.pk: agent.name for agent in agent_list(project=request.project)}
    granted = agents_granting_mcp_server(project=request.project, name=server.name)
    return [{"id": a, "name": names[a]} for a in granted if a in names]


def _headers_problem(values: ServerValues) -> Problems:
    problems = Problems()
    names = [name for name, _ in values.headers]
    if any(not name for name in names):
        problems.add(HEADER_PREFIX, "A header has a value and no name.")
    elif len(set(names)) < len(names):
        problems.add(HEADER_PREFIX, "A header is named twice.")
    return problems


@member_page("GET", "POST")
def mcp_server_new(request: MemberRequest) -> HttpResponse:
    values, problems = ServerValues(), Problems()
    if request.method == "POST":
        values = ServerValues.posted(request)
        problems = _headers_problem(values)
        if not problems:
            try:
                body = MCP_SERVER_WRITE.parse(values.body())
                throttle.dashboard_action(request.project.pk, request.user.pk)  # its tools are listed now
                server = services.mcp_server_create(
                    project=request.project, name=body.name, url=body.url, headers=body.headers
                )
            except ApiError as exc:
                problems = problems_from(exc, FIELDS)
            else:
                messages.success(request, f"Added {server.name}: it listed {len(server.tools)} tools.")
                return redirect("dashboard:mcp-server", server_id=server.pk)
    context = {"values": values, "problems": problems, "server": None}
    return render(request, "dashboard/mcp_server.html", context, status=422 if problems else 200)


@member_page("GET", "POST")
def mcp_server_detail(request: MemberRequest, server_id: str) -> HttpResponse:
    server = selectors.mcp_server_get(project=request.project, server_id=server_id)
    values, problems = ServerValues.of(server), Problems()
    if request.method == "POST":
        values = ServerValues.posted(request)
        problems = _headers_problem(values)
        if not problems:
            try:
                body = MCP_SERVER_WRITE.parse(values.body(), partial=True)
                throttle.dashboard_action(request.project.pk, request.user.pk)
                server = services.mcp_server_update(
                    server=server,
                    name=body.name,
                    url=body.url,
                    headers=body.headers,
                    granted_by=lambda: agents_granting_mcp_server(project=request.project, name=server.name),
                )
            except ApiError as exc:
                problems = problems_from(exc, FIELDS)
            else:
                messages.success(request, f"Saved {server.name}; it listed {len(server.tools)} tools again.")
                return redirect("dashboard:mcp-server", server_id=server.pk)
    context = {"values": values, "problems": problems, "server": server, "used_by": _used_by(request, server)}
    return render(request, "dashboard/mcp_server.html", context, status=422 if problems else 200)


@member_page("POST")
def mcp_server_refresh(request: MemberRequest, server_id: str) -> HttpResponse:
    server = selectors.mcp_server_get(project=request.project, server_id=server_id)
    try:
        throttle.dashboard_action(request.project.pk, request.user.pk)
    except ApiError as exc:
        messages.error(request, exc.message)
        return redirect("dashboard:mcp-server", server_id=server.pk)
    server = services.mcp_server_refresh(server=server)
    if server.last_error:
        messages.error(
            request, f"It could not be listed again: {server.last_error['message']}. The last listing stays."
        )
    else:
        messages.success(request, f"Listed again: {len(server.tools)} tools. Agents get changes when published again.")
    return redirect("dashboard:mcp-server", server_id=server.pk)


@member_page("POST")
def mcp_server_delete(request: MemberRequest, server_id: str) -> HttpResponse:
    server = selectors.mcp_server_get(project=request.project, server_id=server_id)
    try:
        services.mcp_server_delete(
            server=server, granted_by=agents_granting_mcp_server(project=request.project, name=server.name)
        )
    except ApiError as exc:
        messages.error(request, exc.message)
        return redirect("dashboard:mcp-server", server_id=server.pk)
    messages.success(request, f"Deleted {server.name}. Published versions keep their copy of the tools they grant.")
    return redirect("dashboard:tools")
