"""Tool arguments checked against a tenant's JSON Schema (HTTP tool and client tool `parameters`), for the policy
check and request rendering alike: `argument_errors(schema, arguments)`.

Both the schema (a tenant's) and the arguments (a model's) are hostile, so:
- Only a schema within the tenant-schema bounds (`tools.schema_bounds`: keywords, size, depth, references that
  don't fan out, `uniqueItems` under a small `maxItems`) is evaluated at all. They are checked when a schema is
  written; here again, so a schema stored before they existed is refused, never run.
- The arguments are at most `MAX_ARGUMENT_BYTES` of JSON.
- One time budget (`CHECK_BUDGET_S`) covers a whole check: every keyword asks for time left before it runs, so no
  mix of schema and arguments runs past it by more than one keyword's work.
- Every regular expression a schema brings runs on the `regex` module with a time limit, never on Python's `re`
  (no timeout, deaf to signals): `pattern`, and the property-name patterns of `patternProperties`, also where
  `additionalProperties` asks which names those cover; within the same budget, so a thousand keys against a slow
  pattern can't add up either.
- `uniqueItems` is linear (a canonical key per item) instead of jsonschema's comparison of every pair.
- `format` is an annotation only: no format checker runs, so no format regex either.
- `$ref` resolves inside the schema only. jsonschema's default registry would fetch an http(s) `$ref` with urllib
  from inside our network; here nothing is ever retrieved.
Anything that can't be checked raises `UncheckableArguments`: the call is refused, never let through unchecked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import regex
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import SchemaError, UnknownType
from referencing import Registry
from referencing.exceptions import Unresolvable

from tools.schema_bounds import tenant_schema_problem

CHECK_BUDGET_S = 0.5  # the whole check: every keyword, every pattern
PATTERN_TIMEOUT_S = 0.05  # one pattern against one string, within what is left of the budget
MAX_ARGUMENT_BYTES = 64 * 1024  # compact JSON, UTF-8


class UncheckableArguments(Exception):
    """The arguments can't be checked against this schema (in time, or at all): refuse the call."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


_DEADLINE: ContextVar[float | None] = ContextVar("kagent_argument_check_deadline", default=None)


def _search(pattern: str, text: str) -> bool:
    """`regex.search(pattern, text)` within the time left; UncheckableArguments when there is none."""
    deadline = _DEADLINE.get()
    left = PATTERN_TIMEOUT_S if deadline is None else min(PATTERN_TIMEOUT_S, deadline - time.monotonic())
    if left <= 0:
        raise UncheckableArguments("the arguments could not be checked against the tool's patterns in time")
    try:
        return regex.search(pattern, text, timeout=left) is not None
    except TimeoutError:
        raise UncheckableArguments(
            f"the arguments could not be checked against the pattern {pattern[:60]!r} in time"
        ) from None
    except regex.error:
        raise UncheckableArguments(f"the tool's pattern {pattern[:60]!r} is not a valid regular expression") from None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance[:60]!r} does not match {pattern[:60]!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """jsonschema's `additionalProperties`, with the names `patternProperties` covers found by `_search`."""
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key for key in instance if key not in properties and not any(_search(pattern, key) for pattern in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        shown = ", ".join(repr(str(extra)[:60]) for extra in sorted(extras, key=str)[:10])
        yield ValidationError(f"unknown argument(s): {shown}")


def _unique_key(value: Any) -> Hashable:
    """Equal keys exactly for the values jsonschema calls equal: 1 and 1.0 alike, true and 1 not."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, float) and value.is_integer():
        return ("number", int(value))
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, Mapping):
        return ("object", frozenset((key, _unique_key(item)) for key, item in value.items()))
    if isinstance(value, list):
        return ("array", tuple(_unique_key(item) for item in value))
    return ("other", repr(value))


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """jsonschema's `uniqueItems` compares every pair of items (13.8 s for 4,000 objects); one key each instead."""
    if unique and validator.is_type(instance, "array"):
        if len({_unique_key(item) for item in instance}) != len(instance):
            yield ValidationError("the items must be unique")


Keyword = Callable[[Any, Any, Any, Any], Any]


def _within_budget(keyword: Keyword) -> Keyword:
    """`keyword`, refusing to start once the check's budget is spent."""

    def checked(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        deadline = _DEADLINE.get()
        if deadline is not None and time.monotonic() > deadline:
            raise UncheckableArguments("the arguments could not be checked against the tool's parameters in time")
        return keyword(validator, value, instance, schema)

    return checked


_KEYWORDS: dict[str, Keyword] = {
    **Draft202012Validator.VALIDATORS,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}
# jsonschema's `extend` has no annotations in its stubs.
_BaseValidator: Any = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {name: _within_budget(keyword) for name, keyword in _KEYWORDS.items()}
)
# Nothing outside the schema resolves: a `$ref` to a URL is Unresolvable, never fetched. (jsonschema adds the
# dialects' own meta-schemas to a registry it is given.)
_NO_RETRIEVAL: Registry[Any] = Registry()


def argument_errors(schema: Any, arguments: Any) -> list[ValidationError]:
    """Every way `arguments` fail `schema` (empty when they validate). Raises UncheckableArguments."""
    if not isinstance(schema, Mapping):
        raise UncheckableArguments("the tool's parameters are not a JSON Schema object")
    problem = tenant_schema_problem(schema)
    if problem is not None:
        raise UncheckableArguments(f"the tool's parameters are outside the bounds for tool schemas ({problem.text})")
    try:
        size = len(json.dumps(arguments, ensure_ascii=False, separators=(",", ":")).encode())
    except (TypeError, ValueError, RecursionError):
        raise UncheckableArguments("the arguments are not JSON") from None
    if size > MAX_ARGUMENT_BYTES:
        raise UncheckableArguments(f"the arguments are more than {MAX_ARGUMENT_BYTES // 1024} KiB of JSON")
    token = _DEADLINE.set(time.monotonic() + CHECK_BUDGET_S)
    try:
        validator = _BaseValidator(dict(schema), registry=_NO_RETRIEVAL)  # no format_checker: format is annotation
        return list(validator.iter_errors(arguments))
    except (SchemaError, UnknownType, Unresolvable) as exc:
        raise UncheckableArguments("the tool's parameters schema can't be evaluated") from exc
    except RecursionError as exc:
        raise UncheckableArguments("the tool's parameters schema refers to itself without end") from exc
    finally:
        _DEADLINE.reset(token)
