from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.db.models import QuerySet

from kagent.bindings import Binding
from kagent.errors import NotFound
from kagent.models import Project
from tools.mcp_validation import identity_parameters, mcp_tool_problem
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


class McpGrantProblem(NamedTuple):
    code: str  # unknown_tool | tool_not_grantable | identity_as_parameter
    at: int  # the grant's index in `tools.mcp`
    message: str

    @property
    def path(self) -> str:
        return f"$.tools.mcp[{self.at}]"


@dataclass(frozen=True)
class McpGrants:
    """The definitions of the MCP tools a config grants (`<server>__<tool>` -> definition), and what stands in the
    way of the rest: a problem for a server that isn't there, a tool its listing doesn't have, one it lists as not
    grantable (or that isn't by today's rules: a listing from before them), or one granted as needing a verified
    user whose arguments would carry identity from the model."""

    definitions: dict[str, dict[str, Any]]
    problems: list[McpGrantProblem]

    def not_grantable(self) -> list[McpGrantProblem]:
        return [problem for problem in self.problems if problem.code != "unknown_tool"]


def mcp_servers_named(*, project_id: str, names: Iterable[str]) -> dict[str, McpServer]:
    wanted = set(names)
    return {s.name: s for s in McpServer.objects.filter(project_id=project_id, name__in=wanted)} if wanted else {}


def mcp_granted(
    *, project_id: str, grants: Iterable[Mapping[str, Any]], servers: Mapping[str, McpServer] | None = None
) -> McpGrants:
    """What `tools.mcp` grants, as the project's MCP servers list it now (one query, none with `servers` given:
    the project's servers by name, at least those the grants name)."""
    grants = [grant for grant in grants if isinstance(grant, Mapping)]
    if servers is None:
        servers = mcp_servers_named(project_id=project_id, names=(grant.get("server", "") for grant in grants))
    definitions: dict[str, dict[str, Any]] = {}
    problems: list[McpGrantProblem] = []
    for index, grant in enumerate(grants):
        server = servers.get(grant.get("server", ""))
        listed = server.listed(grant.get("tool", "")) if server is not None else None
        if server is None:
            problems.append(McpGrantProblem("unknown_tool", index, f"there is no MCP server named {grant['server']}"))
        elif listed is None:
            message = f"the MCP server {server.name} doesn't list a tool named {grant['tool']}"
            problems.append(McpGrantProblem("unknown_tool", index, message))
        elif not listed.get("grantable") or (reason := mcp_tool_problem(server=server.name, tool=listed)):
            message = f"{grant['tool']} can't be granted: {listed.get('reason') or reason}"
            problems.append(McpGrantProblem("tool_not_grantable", index, message))
        elif grant.get("requires_verified_user") and (named := identity_parameters(listed["input_schema"])):
            message = (
                f"{named[0]} looks like identity. On a tool that needs a verified user, identity comes from the "
                'credential (sent to the server as params._meta["k-agent/end_user"]), never from the model'
            )
            problems.append(McpGrantProblem("identity_as_parameter", index, message))
        else:
            definition = server.definition(listed)
            definitions[definition["name"]] = definition
    return McpGrants(definitions=definitions, problems=problems)


# --- who grants a tool (the agents above this app, bound when they are ready) -----------------------------------


@dataclass(frozen=True)
class Grants:
    """The ids of the agents whose draft grants the HTTP tool `name` / a tool of the MCP server `name`: deleting or
    renaming one it grants is refused. Bound by the agents app (agents/apps.py), whose drafts hold the grants."""

    http_tool: Callable[..., list[str]]  # (project=, name=)
    mcp_server: Callable[..., list[str]]  # (project=, name=)


GRANTS: Binding[Grants] = Binding("the agents' grants of a tool")


def bind_grants(grants: Grants) -> None:
    GRANTS.bind(grants)


def agents_granting_tool(*, project: Project, name: str) -> list[str]:
    return GRANTS.get().http_tool(project=project, name=name)


def agents_granting_mcp_server(*, project: Project, name: str) -> list[str]:
    return GRANTS.get().mcp_server(project=project, name=name)
