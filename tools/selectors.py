from __future__ import annotations

from django.db.models import QuerySet

from kagent.errors import NotFound
from kagent.models import Project
from tools.models import HttpTool, McpServer


def http_tool_list(*, project: Project) -> QuerySet[HttpTool]:
    return HttpTool.objects.filter(project=project)


def http_tool_get(*, project: Project, name: str) -> HttpTool:
    tool = http_tool_list(project=project).filter(name=name).first()
    if tool is None:
        raise NotFound("No HTTP tool with that name in this project.")
    return tool


def mcp_server_list(*, project: Project) -> QuerySet[McpServer]:
    return McpServer.objects.filter(project=project)


def mcp_server_get(*, project: Project, server_id: str) -> McpServer:
    server = mcp_server_list(project=project).filter(pk=server_id).first()
    if server is None:
        raise NotFound("No MCP server with that id in this project.")
    return server
