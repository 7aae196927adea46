"""The JSON Schema validator for tool arguments, shared by the policy check and request rendering.

A tenant's `pattern` runs with a time limit (the `regex` module), so a catastrophic pattern like `(a+)+b|d` against
a model's argument can't hold a worker: Python's `re` has no timeout and ignores signals while matching.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import regex
from jsonschema import Draft202012Validator, ValidationError, validators

PATTERN_TIMEOUT_S = 0.05


def _bounded_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        found = regex.search(pattern, instance, timeout=PATTERN_TIMEOUT_S)
    except TimeoutError:
        yield ValidationError(f"could not be checked against the pattern {pattern[:60]!r} in time")
        return
    except regex.error:
        yield ValidationError("the tool's pattern is not a valid regular expression")
        return
    if found is None:
        yield ValidationError(f"{instance[:60]!r} does not match {pattern[:60]!r}")


# jsonschema's `extend` has no annotations in its stubs.
StrictValidator: Any = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {"pattern": _bounded_pattern}
)
