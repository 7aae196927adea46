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
