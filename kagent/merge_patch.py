"""RFC 7396 JSON merge patch, for every PATCH of a JSON document (an agent's draft config, an HTTP tool's config)."""

from __future__ import annotations

import copy
from typing import Any


def merge_patch(target: Any, patch: Any) -> Any:
    """Objects merge, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def merge_patch_between(before: Any, after: Any) -> Any:
    """The merge patch that turns `before` into `after` (`merge_patch(before, it) == after`), for a form that edits
    a whole document through a PATCH service. `after` holds no nulls (a patch can't set one)."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return copy.deepcopy(after)
    patch: dict[str, Any] = {key: None for key in before if key not in after}
    for key, value in after.items():
        if key not in before:
            patch[key] = copy.deepcopy(value)
        elif before[key] != value:
            patch[key] = merge_patch_between(before[key], value)
    return patch
