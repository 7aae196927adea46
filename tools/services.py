"""Writes for HTTP tools. Every write validates the whole definition; a refused write changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from kagent.errors import Conflict, Unprocessable
from kagent.ids import new_id
from kagent.inputs import UNSET, is_set
from kagent.masking import mask_secrets, mask_secrets_in_json
from kagent.merge_patch import merge_patch
from kagent.models import Project, SigningSecret
from kagent.secrets import SecretValue, secret_allowed_hosts, secret_resolve, signing_secrets_valid
from tools import mcp_client, mcp_jsonrpc
from tools.http_call import HttpCallOutcome, http_tool_call
from tools.mcp_call import mcp_server
from tools.mcp_validation import mcp_tool_problem, validate_mcp_server
from tools.models import HttpTool, McpServer
from tools.schema_bounds import as_2020_12
from tools.template_values import EndUserIdentity, TemplateError
from tools.templating import render_preview
from tools.validation import validate_http_tool


def _validate(project: Project, definition: dict[str, Any]) -> dict[str, Any]:
    return validate_http_tool(definition, secret_hosts=lambda name: secret_allowed_hosts(project=project, name=name))


def http_tool_create(
    *,
    project: Project,
    name: str,
    description: str,
    effect: str,
    config: dict[str, Any],
    requires_verified_user: bool = False,
) -> HttpTool:
    clean = _validate(
        project,
        {
            "name": name,
            "description": description,
            "effect": effect,
            "requires_verified_user": requires_verified_user,
            "config": config,
        },
    )
    try:
        with transaction.atomic():
            return HttpTool.objects.create(project=project, **clean)
    except IntegrityError:
        raise Conflict("tool_already_exists", f"This project already has an HTTP tool named {clean['name']}.") from None


def http_tool_update(
    *,
    tool: HttpTool,
    name: str = UNSET,
    description: str = UNSET,
    effect: str = UNSET,
    requires_verified_user: bool = UNSET,
    config_patch: dict[str, Any] = UNSET,
) -> HttpTool:
    """Top-level fields replace, `config_patch` is a JSON merge patch; the result is validated whole.

    Published versions keep their own copies: an edit reaches production only when the agent is published again.
    """
    if is_set(name) and name != tool.name:
        raise Unprocessable(
            "invalid_tool",
            "A tool's name can't change: agents grant it by name. Create a new tool instead.",
            details=[{"path": "$.name", "message": "can't change"}],
        )
    definition: dict[str, Any] = {
        "name": tool.name,
        "description": description if is_set(description) else tool.description,
        "effect": effect if is_set(effect) else tool.effect,
        "requires_verified_user": (
            requires_verified_user if is_set(requires_verified_user) else tool.requires_verified_user
        ),
        "config": merge_patch(tool.config, config_patch) if is_set(config_patch) else tool.config,
    }
    clean = _validate(tool.project, definition)
    clean["updated_at"] = timezone.now()
    HttpTool.objects.filter(pk=tool.pk).update(**clean)
    tool.refresh_from_db()
    return tool


def _refuse_in_use(granted_by: Sequence[str], what: str = "this tool") -> None:
    users = list(granted_by)
    if users:
        raise Conflict(
            "tool_in_use",
            f"The draft of agent(s) {', '.join(users)} grants {what}; remove the grant first.",
            details={"agents": users},
        )


def http_tool_delete(*, tool: HttpTool, granted_by: Sequence[str]) -> None:
    """Refused while an agent's draft grants the tool (`granted_by`: those agents' ids, from
    `agents.selectors.agents_granting_tool`); published versions hold copies and keep working."""
    _refuse_in_use(granted_by)
    tool.delete()


# --- trying a definition: the rendered request, and a live test call -------------------------------------------
# For a saved tool or one not yet saved (the editor's form as it stands): a definition not yet saved is checked
# by the same validation as a write first, so a preview never shows what a save would refuse.


@dataclass(frozen=True)
class ToolSample:
    """Sample values to try a definition with: the model's arguments, a verified end user (or None), the
    agent's variables."""

    arguments: dict[str, Any]
    end_user: EndUserIdentity | None
    variables: dict[str, str]


@dataclass(frozen=True)
class ToolPreview:
    """The request the tool would send (secrets masked), or why it would not send one (`error`: code, message,
    and the placeholder or parameter at fault)."""

    request: dict[str, Any] | None
    error: dict[str, str] | None


def http_tool_check(*, project: Project, definition: dict[str, Any]) -> dict[str, Any]:
    """A definition not yet saved, checked and normalized as a write would (raises Unprocessable)."""
    return _validate(project, definition)


def _lookup(project: Project) -> Callable[[str], SecretValue | None]:
    return lambda name: secret_resolve(project_id=project.pk, name=name)


def http_tool_preview(*, project: Project, definition: Mapping[str, Any], sample: ToolSample) -> ToolPreview:
    """What a call with `sample` would send: rendered by the call's own templating, nothing sent."""
    try:
        request = render_preview(
            tool=definition,
            arguments=sample.arguments,
            end_user=sample.end_user,
            variables=sample.variables,
            secret_lookup=_lookup(project),
        )
    except TemplateError as exc:
        error = {"code": exc.code, "message": exc.message, "placeholder": exc.placeholder, "parameter": exc.parameter}
        return ToolPreview(request=None, error=error)
    return ToolPreview(request=request, error=None)


def http_tool_test_call(*, project: Project, definition: Mapping[str, Any], sample: ToolSample) -> HttpCallOutcome:
    """One live call with `sample`, exactly as a run makes it: signed with the project's tool signing secret,
    through the hardened client (so it is in the egress log), the answer shaped. Returns what the model would see
    and what the run steps would record."""
    return http_tool_call(
        project_id=project.pk,
        tool=definition,
        arguments=sample.arguments,
        call_id=new_id("call"),
        end_user=sample.end_user,
        variables=sample.variables,
        secret_lookup=_lookup(project),
        signing_secrets=signing_secrets_valid(project=project, purpose=SigningSecret.Purpose.TOOL_SIGNING),
    )


# --- MCP servers (SPEC §6 "MCP servers") ------------------------------------------------------------------------
# A server is listed before it is stored: one that can't be listed is refused and nothing is written. A refresh that
# fails keeps the listing it had and records the error. Nothing is listed inside a transaction.


def _mcp_validate(project: Project, *, name: str, url: str, headers: dict[str, str]) -> dict[str, Any]:
    return validate_mcp_server(
        name=name,
        url=url,
        headers=headers,
        secret_hosts=lambda secret: secret_allowed_hosts(project=project, name=secret),
    )


def _mcp_listed(project: Project, *, name: str, url: str, headers: dict[str, str]) -> dict[str, Any]:
    """The server's tools, each marked grantable or not with the reason, as the row stores them. Raises McpError
    (a header's secret that can't be sent is one too: nothing is sent)."""
    try:
        server = mcp_server(name=name, url=url, headers=headers, secret_lookup=_lookup(project))
    except TemplateError as exc:
        raise mcp_jsonrpc.McpError(exc.code, exc.message) from None
    listing = mcp_client.list_tools(
        server=server,
        project_id=project.pk,
        signing_secrets=signing_secrets_valid(project=project, purpose=SigningSecret.Purpose.TOOL_SIGNING),
        message_id=new_id("mcpl"),
    )
    secrets = server.secret_values
    tools = []
    for listed in listing.tools:
        tool = {
            "name": listed["name"],
            "description": mask_secrets(listed["description"], secrets) if secrets else listed["description"],
            "input_schema": listed["input_schema"],
        }
        try:  # its text reaches the model as the tool's parameters: a secret the server echoed there is masked
            tool["input_schema"] = mask_secrets_in_json(as_2020_12(listed["input_schema"]), secrets)
        except ValueError:
            tool["input_schema"] = {}
            reason: str | None = "The input schema can't be read (nested too deeply)."
        else:
            reason = mcp_tool_problem(server=name, tool=tool)
        tools.append({**tool, "grantable": reason is None, "reason": reason})
    return {
        "tools": tools,
        "truncated": listing.truncated,
        "protocol_version": listing.protocol_version,
        "listed_at": timezone.now(),
        "last_error": None,
    }


def _unlisted(exc: mcp_jsonrpc.McpError) -> Unprocessable:
    return Unprocessable(
        "mcp_unreachable",
        f"The MCP server's tools could not be listed: {exc.message}. Nothing was saved.",
        details={"code": exc.code},
    )


def _mcp_name_taken(project: Project, name: str, *, other_than: str | None = None) -> None:
    taken = McpServer.objects.filter(project=project, name=name).exclude(pk=other_than).exists()
    if taken:
        raise Conflict("tool_name_conflict", f"This project already has an MCP server named {name}.")


def mcp_server_create(*, project: Project, name: str, url: str, headers: dict[str, str]) -> McpServer:
    clean = _mcp_validate(project, name=name, url=url, headers=headers)
    _mcp_name_taken(project, name)
    try:
        listed = _mcp_listed(project, **clean)
    except mcp_jsonrpc.McpError as exc:
        raise _unlisted(exc) from None
    try:
        with transaction.atomic():
            return McpServer.objects.create(project=project, **clean, **listed)
    except IntegrityError:
        raise Conflict("tool_name_conflict", f"This project already has an MCP server named {name}.") from None


def mcp_server_update(
    *,
    server: McpServer,
    name: str = UNSET,
    url: str = UNSET,
    headers: dict[str, str] = UNSET,
    granted_by: Callable[[], Sequence[str]] = list,
) -> McpServer:
    """Fields given replace (`headers` whole); the result is validated and listed again before it is stored. A new
    name is refused while an agent's draft grants the server's tools (`granted_by`: those agents' ids, asked only
    for a rename): the grants name it."""
    if is_set(name) and name != server.name:
        _refuse_in_use(granted_by(), "tools of this MCP server by its name")
    clean = _mcp_validate(
        server.project,
        name=name if is_set(name) else server.name,
        url=url if is_set(url) else server.url,
        headers=headers if is_set(headers) else server.headers,
    )
    _mcp_name_taken(server.project, clean["name"], other_than=server.pk)
    try:
        listed = _mcp_listed(server.project, **clean)
    except mcp_jsonrpc.McpError as exc:
        raise _unlisted(exc) from None
    try:
        with transaction.atomic():
            McpServer.objects.filter(pk=server.pk).update(**clean, **listed, updated_at=timezone.now())
    except IntegrityError:
        raise Conflict("tool_name_conflict", f"This project already has an MCP server named {clean['name']}.") from None
    server.refresh_from_db()
    return server


def mcp_server_refresh(*, server: McpServer) -> McpServer:
    """Lists the server again: the new listing, or the error with the previous listing kept."""
    try:
        listed = _mcp_listed(server.project, name=server.name, url=server.url, headers=server.headers)
    except mcp_jsonrpc.McpError as exc:
        changes: dict[str, Any] = {"last_error": {"code": exc.code, "message": exc.message}}
    else:
        changes = listed
    # Only if the server is still what was listed: an edit made meanwhile has its own listing.
    McpServer.objects.filter(pk=server.pk, name=server.name, url=server.url, headers=server.headers).update(
        **changes, updated_at=timezone.now()
    )
    server.refresh_from_db()
    return server


def mcp_server_delete(*, server: McpServer, granted_by: Sequence[str]) -> None:
    """Refused while an agent's draft grants the server's tools; published versions hold copies of what they
    granted (its URL and headers too) and keep working."""
    _refuse_in_use(granted_by, "tools of this MCP server")
    server.delete()
