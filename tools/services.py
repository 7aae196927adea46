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
from kagent.merge_patch import merge_patch
from kagent.models import Project, SigningSecret
from kagent.secrets import SecretValue, secret_allowed_hosts, secret_resolve, signing_secrets_valid
from tools.http_call import HttpCallOutcome, http_tool_call
from tools.models import HttpTool
from tools.templating import EndUserIdentity, TemplateError, render_preview
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


def http_tool_delete(*, tool: HttpTool, granted_by: Sequence[str]) -> None:
    """Refused while an agent's draft grants the tool (`granted_by`: those agents' ids, from
    `agents.selectors.agents_granting_tool`); published versions hold copies and keep working."""
    users = list(granted_by)
    if users:
        raise Conflict(
            "tool_in_use",
            f"The draft of agent(s) {', '.join(users)} grants this tool; remove the grant first.",
            details={"agents": users},
        )
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
