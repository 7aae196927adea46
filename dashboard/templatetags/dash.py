"""Template helpers of the dashboard: field ids and errors next to fields, JSON and timestamps."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince

from dashboard.problems import Problems, field_id

register = template.Library()


@register.filter
def fid(path: str) -> str:
    return field_id(path)


@register.simple_tag
def ferr(problems: Problems | None, path: str) -> SafeString:
    """The error of the field at `path`, as a paragraph the field points at with aria-describedby."""
    message = problems.at(path) if problems else None
    if not message:
        return mark_safe("")  # noqa: S308 - a constant
    return format_html('<p class="field-error" id="{}-error">{}</p>', field_id(path), message)


@register.simple_tag
def faria(problems: Problems | None, path: str, hint: str = "") -> SafeString:
    """`aria-invalid` and `aria-describedby` for the field at `path` (its error, and its hint if it has one)."""
    described = [hint] if hint else []
    invalid = bool(problems and problems.at(path))
    if invalid:
        described.insert(0, f"{field_id(path)}-error")
    if not described:
        return mark_safe("")  # noqa: S308 - a constant
    if invalid:
        return format_html(' aria-invalid="true" aria-describedby="{}"', " ".join(described))
    return format_html(' aria-describedby="{}"', " ".join(described))


@register.filter
def pretty(value: Any) -> str:
    """JSON as people read it (indented, non-ASCII as is)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


@register.filter
def unix(value: int | None) -> datetime | None:
    """The API's Unix seconds as a date for the `date` filter."""
    return datetime.fromtimestamp(value, tz=UTC) if isinstance(value, int) else None


@register.filter
def get(mapping: Any, key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def waited(since: datetime | None) -> str:
    """How long ago `since` was, as a person says it: "under a minute", "5 minutes", "2 hours, 3 minutes"."""
    if since is None:
        return ""
    if timezone.now() - since < timedelta(minutes=1):
        return "under a minute"
    return timesince(since)


# --- what changed between two versions, for people ---------------------------------------------------------------

_LABELS = {
    "$.config.instructions": "Instructions",
    "$.config.greeting": "Greeting",
    "$.config.model": "Model",
    "$.config.variables": "Variables",
    "$.config.tools.enabled": "Tools switched on",
    "$.config.tools.max_tool_rounds": "Max tool rounds",
    "$.config.tools.allow_anonymous_actions": "Anonymous actions",
    "$.config.tools.approval_expires_minutes": "Approval wait",
    "$.config.business_hours": "Business hours",
}
_PARTS = {"builtin": "Built-in tool", "http": "HTTP tool", "mcp": "MCP tool", "client": "Client tool"}
MAX_DIFF_WORDS = 2000  # longer texts are shown whole, before and after


@register.filter
def change_label(path: str) -> str:
    """A diff's JSON path as a person reads it: `$.config.tools.builtin.create_ticket.rules` -> "Built-in tool
    create_ticket: rules"."""
    for prefix, label in _LABELS.items():
        if path == prefix:
            return label
        if path.startswith(prefix + "."):
            return f"{label}: {path.removeprefix(prefix + '.').replace('.', ' ')}"
    for kind, label in _PARTS.items():
        prefix = f"$.config.tools.{kind}"
        if path.startswith(prefix):
            rest = path.removeprefix(prefix).lstrip(".")
            name, _, field = rest.removeprefix("[").partition("]") if rest.startswith("[") else rest.partition(".")
            field = field.lstrip(".")
            return f"{label} {name}" + (f": {field.replace('.', ' ')}" if field else "")
    if path.startswith("$.http_tools."):
        return f"HTTP tool {path.removeprefix('$.http_tools.').replace('.', ' ', 1)} (its definition)"
    if path.startswith("$.mcp_tools."):
        return f"MCP tool {path.removeprefix('$.mcp_tools.').replace('.', ' ', 1)} (as listed)"
    return path.removeprefix("$.config.").removeprefix("$.")


@register.simple_tag
def word_diff(before: Any, after: Any) -> SafeString:
    """Two texts with what changed marked: removed words in <del>, added ones in <ins> (escaped). Empty when either is
    not text or they are too long to compare word by word."""
    import difflib

    from django.utils.html import escape

    if not isinstance(before, str) or not isinstance(after, str):
        return mark_safe("")
    old, new = before.split(" "), after.split(" ")
    if len(old) + len(new) > MAX_DIFF_WORDS:
        return mark_safe("")
    out: list[str] = []
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(escape(" ".join(old[a1:a2])))
            continue
        if a2 > a1:
            out.append(f"<del>{escape(' '.join(old[a1:a2]))}</del>")
        if b2 > b1:
            out.append(f"<ins>{escape(' '.join(new[b1:b2]))}</ins>")
    return mark_safe(" ".join(out))  # noqa: S308  (every piece escaped above)
