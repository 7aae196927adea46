"""What changed between two agent versions (SPEC §4, `GET /v1/agents/{id}/versions/{a}/diff/{b}`): a list of JSON
paths, each added, removed or changed, with the value before and after. Pure functions, no Django.

Paths read like the API's error paths (`$.config.tools.max_tool_rounds`). Lists of named things (HTTP tool grants
by `tool`, MCP tool grants by `<server>__<tool>`, client tools by `name`) are matched by that name, so a grant added
in the middle reads as one added grant, not as every later grant changed: `$.config.tools.http[order_status].rules`.
Other lists of the same length are compared item by item; lists of different lengths change as a whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

ChangeKind = Literal["added", "removed", "changed"]
# linear: anchored, one class
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_NAME_KEYS = ("tool", "name")


@dataclass(frozen=True)
class Change:
    path: str
    change: ChangeKind
    before: Any  # None when added
    after: Any  # None when removed


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if _PLAIN_KEY.match(key) else f"{path}[{key!r}]"


def _names(items: Sequence[Any]) -> tuple[str, list[str]] | None:
    """The key that names every item of `items` uniquely, and the names in order; None if there is none. MCP tool
    grants are named as the model sees them, `<server>__<tool>` (one server's `lookup` is not another's)."""
    if items and all(isinstance(i, dict) and isinstance(i.get("server"), str) for i in items):
        mcp_names = [f"{i['server']}__{i.get('tool')}" for i in items]
        if len(set(mcp_names)) == len(mcp_names):
            return "server", mcp_names
    for key in _NAME_KEYS:
        names = [item.get(key) if isinstance(item, dict) else None for item in items]
        if all(isinstance(name, str) for name in names) and len(set(names)) == len(names):
            return key, [str(name) for name in names]
    return None


def _keyed(before: dict[Any, Any], after: dict[Any, Any], where: Callable[[Any], str]) -> list[Change]:
    changes: list[Change] = []
    for key in list(dict.fromkeys([*before, *after])):
        if key not in before:
            changes.append(Change(where(key), "added", None, after[key]))
        elif key not in after:
            changes.append(Change(where(key), "removed", before[key], None))
        else:
            changes += json_diff(before[key], after[key], where(key))
    return changes


def json_diff(before: Any, after: Any, path: str = "$") -> list[Change]:
    """Every difference between two JSON values, depth first: object keys in sorted order, named items in order."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        ordered = dict.fromkeys(sorted({*before, *after}, key=str))
        return _keyed(
            {key: before[key] for key in ordered if key in before},
            {key: after[key] for key in ordered if key in after},
            lambda key: _key_path(path, str(key)),
        )
    if isinstance(before, list) and isinstance(after, list):
        named_before, named_after = _names(before), _names(after)
        if named_before and named_after and named_before[0] == named_after[0]:
            return _keyed(
                dict(zip(named_before[1], before, strict=True)),
                dict(zip(named_after[1], after, strict=True)),
                lambda name: f"{path}[{name}]",
            )
        if len(before) == len(after):
            return [
                change
                for index, (old_item, new_item) in enumerate(zip(before, after, strict=True))
                for change in json_diff(old_item, new_item, f"{path}[{index}]")
            ]
    return [Change(path, "changed", before, after)]


@dataclass(frozen=True)
class Snapshot:
    """What a version holds, or what the draft would publish: the config and the granted HTTP and MCP tools'
    definitions."""

    config: dict[str, Any]
    http_tools: dict[str, Any]
    mcp_tools: dict[str, Any]


def snapshot_diff(before: Snapshot, after: Snapshot) -> list[Change]:
    return (
        json_diff(before.config, after.config, "$.config")
        + json_diff(before.http_tools, after.http_tools, "$.http_tools")
        + json_diff(before.mcp_tools, after.mcp_tools, "$.mcp_tools")
    )
