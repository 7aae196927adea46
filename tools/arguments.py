"""Tool arguments checked against a tenant's JSON Schema (HTTP tool and client tool `parameters`), for the policy
check and request rendering alike: `argument_errors(schema, arguments)`.

Both the schema (a tenant's) and the arguments (a model's) are hostile, so:
- Every regular expression a schema brings runs on the `regex` module with a time limit, never on Python's `re`
  (no timeout, deaf to signals): `pattern`, and the property-name patterns of `patternProperties`, also where
  `additionalProperties` asks which names those cover. One budget (`CHECK_BUDGET_S`) covers a whole check, so a
  thousand keys against a slow pattern can't add up either. `unevaluatedProperties` next to a `patternProperties`
  (jsonschema reads those with `re`, deep inside) is not evaluated at all.
- `format` is an annotation only: no format checker runs, so no format regex either.
- `$ref` resolves inside the schema only. jsonschema's default registry would fetch an http(s) `$ref` with urllib
  from inside our network; here nothing is ever retrieved.
Anything that can't be checked raises `UncheckableArguments`: the call is refused, never let through unchecked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import regex
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import SchemaError, UnknownType
from referencing import Registry
from referencing.exceptions import Unresolvable

CHECK_BUDGET_S = 0.5  # all the patterns of one check together
PATTERN_TIMEOUT_S = 0.05  # one pattern against one string, within what is left of the budget


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


# jsonschema's `extend` has no annotations in its stubs.
_BaseValidator: Any = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties},
)
# Nothing outside the schema resolves: a `$ref` to a URL is Unresolvable, never fetched. (jsonschema adds the
# dialects' own meta-schemas to a registry it is given.)
_NO_RETRIEVAL: Registry[Any] = Registry()


def _holds_key(node: Any, key: str) -> bool:
    if isinstance(node, Mapping):
        return key in node or any(_holds_key(value, key) for value in node.values())
    if isinstance(node, list):
        return any(_holds_key(item, key) for item in node)
    return False


def argument_errors(schema: Any, arguments: Any) -> list[ValidationError]:
    """Every way `arguments` fail `schema` (empty when they validate). Raises UncheckableArguments."""
    if not isinstance(schema, Mapping):
        raise UncheckableArguments("the tool's parameters are not a JSON Schema object")
    if _holds_key(schema, "unevaluatedProperties") and _holds_key(schema, "patternProperties"):
        raise UncheckableArguments("unevaluatedProperties together with patternProperties is not supported")
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


def schema_refusal(schema: Any) -> str | None:
    """Why a tenant's parameters schema is refused when it is written (None: fine): what `argument_errors` would
    refuse on every call anyway. (Patterns that don't compile are refused by the meta-schema check already.)"""
    refs: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, Mapping):
            refs.extend(str(node[key]) for key in ("$ref", "$dynamicRef") if isinstance(node.get(key), str))
            for value in node.values():
                walk(value)

    walk(schema)
    outside = [ref for ref in refs if not ref.startswith("#")]
    if outside:
        return f"$ref may only point inside the schema (#/...), not to {outside[0][:60]!r}"
    if _holds_key(schema, "unevaluatedProperties") and _holds_key(schema, "patternProperties"):
        return "unevaluatedProperties together with patternProperties is not supported"
    return None
