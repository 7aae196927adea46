"""The agent editor's tool grants: a built-in's, an HTTP tool's and an MCP server's tool's as the editor shows them, and
the draft's grants read beside the project's tools (granted first, in the draft's order; grants of tools that are gone
too). Parsing only, as the rest of the editor's form (dashboard/editor.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tools.builtin_tool import BuiltinTool
from tools.mcp_validation import mcp_tool_name
from tools.models import HttpTool, McpServer


@dataclass
class BuiltinGrant:
    tool: BuiltinTool
    enabled: bool
    rules: str
    starter_text: str = ""
    approval: str = "never"  # "ask": a person approves each call first (actions only)

    @property
    def path(self) -> str:
        return f"$.tools.builtin.{self.tool.name}"

    @property
    def summary(self) -> str:
        return self.tool.description.split("\n", 1)[0]


@dataclass
class HttpGrant:
    name: str
    description: str  # "" when the tool no longer exists
    effect: str
    exists: bool
    used: bool
    rules: str
    approval: str = "never"

    @property
    def path(self) -> str:
        return f"$.tools.http[{self.name}]"


@dataclass
class McpGrant:
    """A tool an MCP server of the project lists (or a draft's grant of one it no longer lists)."""

    server: str
    tool: str
    description: str
    grantable: bool
    reason: str  # why it can't be granted ("" when it can)
    listed: bool  # the server (still) lists it
    used: bool
    effect: str
    requires_verified_user: bool
    rules: str
    in_draft: bool = False  # the draft grants it (switched on or off)
    approval: str = "never"

    @property
    def name(self) -> str:
        return mcp_tool_name(self.server, self.tool)

    @property
    def path(self) -> str:
        return f"$.tools.mcp[{self.name}]"

    @property
    def granted(self) -> bool:
        """Whether the draft grants it once saved: in use, or with rules, or switched off with settings of its own
        (a read, a verified customer, a person's approval) kept for later."""
        settings_kept = self.in_draft and (self.effect != "action" or self.requires_verified_user)
        return self.used or bool(self.rules.strip()) or settings_kept or self.approval == "ask"


@dataclass
class McpServerGrants:
    """One server's tools in the editor: the granted ones first."""

    name: str
    grants: list[McpGrant]

    @property
    def granted_count(self) -> int:
        return sum(1 for grant in self.grants if grant.used)


def starter_text(tool: BuiltinTool) -> str:
    return "\n".join(starter.rule for starter in tool.starter_rules)


def http_grants(config_tools: Mapping[str, Any], tools: Sequence[HttpTool]) -> list[HttpGrant]:
    grants = {grant["tool"]: grant for grant in config_tools.get("http", [])}
    out = [
        HttpGrant(
            name=tool.name,
            description=tool.description,
            effect=tool.effect,
            exists=True,
            used=bool(grants.get(tool.name, {}).get("enabled", False)),
            rules=str(grants.get(tool.name, {}).get("rules", "")),
            approval=str(grants.get(tool.name, {}).get("approval", "never")),
        )
        for tool in tools
    ]
    known = {tool.name for tool in tools}
    out += [
        HttpGrant(
            name,
            "",
            "",
            False,
            bool(grant.get("enabled", True)),
            str(grant.get("rules", "")),
            str(grant.get("approval", "never")),
        )
        for name, grant in grants.items()
        if name not in known
    ]
    # Granted tools first, in the draft's order, then the project's other tools by name.
    order = list(grants)
    return sorted(out, key=lambda g: (order.index(g.name) if g.name in grants else len(order), g.name))


def mcp_grants(config_tools: Mapping[str, Any], servers: Sequence[McpServer]) -> list[McpServerGrants]:
    """Every tool the project's MCP servers list, with the draft's grant of it; grants of tools no longer listed
    too. Per server (by name), granted tools first in the draft's order, then the others as listed."""
    grants = {(g.get("server"), g.get("tool")): g for g in config_tools.get("mcp", []) if isinstance(g, Mapping)}
    order = list(grants)
    by_server: dict[str, list[McpGrant]] = {}

    def grant_of(server: str, tool: str, **listing: Any) -> McpGrant:
        grant = grants.get((server, tool), {})
        return McpGrant(
            in_draft=(server, tool) in grants,
            server=server,
            tool=tool,
            used=bool(grant.get("enabled", False)),
            effect=str(grant.get("effect", "action")),
            requires_verified_user=bool(grant.get("requires_verified_user", False)),
            rules=str(grant.get("rules", "")),
            approval=str(grant.get("approval", "never")),
            **listing,
        )

    for server in servers:
        by_server[server.name] = [
            grant_of(
                server.name,
                str(item.get("name", "")),
                description=str(item.get("description", "")),
                grantable=bool(item.get("grantable")),
                reason=str(item.get("reason") or ""),
                listed=True,
            )
            for item in server.tools
        ]
    for server_name, tool in order:
        listed = by_server.setdefault(str(server_name), [])
        if not any(g.tool == tool for g in listed):
            missing = grant_of(str(server_name), str(tool), description="", grantable=False, reason="", listed=False)
            listed.append(missing)
    out = []
    for server_name in sorted(by_server):
        items = by_server[server_name]
        items.sort(key=lambda g: order.index((g.server, g.tool)) if (g.server, g.tool) in grants else len(order))
        out.append(McpServerGrants(server_name, items))
    return out
