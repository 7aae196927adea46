"""Bounds on tenant JSON Schemas (SPEC §6 "Tenant JSON Schemas"; issue #27, finding 2): one check,
`tenant_schema_problem(schema)`, for every schema a tenant gives us to validate a model's arguments against (HTTP
tool parameters, client tool parameters, MCP input schemas). It runs when the schema is written, and again before
every validation (`tools.arguments`), so a schema stored before the bounds existed is refused there, never run.

What a schema costs jsonschema is not its size: a 1.9 KB schema whose `$defs` are each an `allOf` of two `$ref`s to
the next doubles its validation time per level (1.9 s at 16, no end at 40), and `uniqueItems` compares every pair
of items (13.8 s for 4,000 objects). So a tenant schema passes only when

- it is at most `MAX_SCHEMA_BYTES` of JSON and a valid Draft 2020-12 schema;
- every keyword is one tool parameters need (`KEYWORDS`); `$schema`, `$defs` and `definitions` only at the root;
- every `$ref` is `#/$defs/<name>` or `#/definitions/<name>` and names one of them (nothing outside is resolved);
- the references form no cycle, and the schema with every `$ref` expanded has at most `MAX_EXPANDED_SUBSCHEMAS`
  subschemas and `MAX_DEPTH` levels (counted once per definition, so checking is linear in the schema's size);
- `anyOf`/`oneOf`/`allOf` have at most `MAX_BRANCHES` branches each;
- `uniqueItems: true` stands next to a `maxItems` of at most `MAX_UNIQUE_ITEMS`.

A problem is `unsupported` (a keyword or reference the bounds don't allow: the caller's existing 422 code for a bad
schema) or `too_complex` (within the allowed keywords, over a limit: 422 `schema_too_complex`). Both name the path.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

SCHEMA_TOO_COMPLEX = "schema_too_complex"

MAX_SCHEMA_BYTES = 32 * 1024  # compact JSON, UTF-8
MAX_EXPANDED_SUBSCHEMAS = 1000
MAX_DEPTH = 20  # subschema levels, through references
MAX_BRANCHES = 32
MAX_UNIQUE_ITEMS = 100

DIALECT = "https://json-schema.org/draft/2020-12/schema"

# Keywords whose value is one subschema, a list of them, or an object of them (walked and counted).
_ONE_SCHEMA = frozenset({"items", "additionalProperties", "propertyNames"})
_SCHEMA_LIST = frozenset({"prefixItems", "anyOf", "oneOf", "allOf"})
_SCHEMA_MAP = frozenset({"properties", "patternProperties"})
_DEFINITIONS = ("$defs", "definitions")  # the root only; reached through `$ref` alone
# Keywords whose value is data (never walked as a schema).
_VALUES = frozenset(
    {
        "type",
        "enum",
        "const",
        "required",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",  # run on the `regex` module with a time limit (tools.arguments)
        "format",  # an annotation: no format checker runs
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "$ref",
        "x-kagent-format",  # HTTP tools: where an argument may go (tools.validation)
    }
)
KEYWORDS = _ONE_SCHEMA | _SCHEMA_LIST | _SCHEMA_MAP | _VALUES
_ROOT_ONLY = frozenset({"$schema", *_DEFINITIONS})
_NOT_IN_NAMES = frozenset("/~%#?\\")


@dataclass(frozen=True)
class SchemaProblem:
    too_complex: bool  # False: a keyword or reference outside the bounds; True: over a limit
    path: str  # JSON path of the subschema at fault, under the caller's `at`
    message: str  # names the path

    @property
    def text(self) -> str:
        return f"{self.path}: {self.message}"


class _Refused(Exception):
    def __init__(self, too_complex: bool, path: str, message: str) -> None:
        super().__init__(message)
        self.problem = SchemaProblem(too_complex, path, message)


def _name(key: str) -> str:
    return key if len(key) <= 64 else key[:63] + "…"


def _subschemas(node: Mapping[str, Any], path: str) -> Iterator[tuple[Any, str]]:
    """The subschemas `node` applies to an instance (not its definitions), with their paths."""
    for keyword, value in node.items():
        if keyword in _ONE_SCHEMA:
            yield value, f"{path}.{keyword}"
        elif keyword in _SCHEMA_LIST:
            for index, item in enumerate(value):
                yield item, f"{path}.{keyword}[{index}]"
        elif keyword in _SCHEMA_MAP:
            for key, item in value.items():
                yield item, f"{path}.{keyword}.{_name(key)}"


def _reference(ref: Any, definitions: Mapping[str, Any], path: str) -> str:
    """The definition a `$ref` names ("$defs/<name>" or "definitions/<name>")."""
    for where in _DEFINITIONS:
        prefix = f"#/{where}/"
        if isinstance(ref, str) and ref.startswith(prefix):
            name = ref[len(prefix) :]
            # A name the resolver would read otherwise (escapes, a deeper pointer) could reach another definition
            # than the one measured here.
            plain = name and not any(ch in _NOT_IN_NAMES or ord(ch) <= 0x20 for ch in name)
            if plain and f"{where}/{name}" in definitions:
                return f"{where}/{name}"
    shown = str(ref)[:80]
    raise _Refused(
        False,
        path,
        f"$ref {shown!r} must name a definition of this schema, as #/$defs/<name> or #/definitions/<name> "
        "with a plain name (no spaces or / ~ % # ? \\); nothing outside the schema is resolved",
    )


def _check_keywords(node: Any, path: str, definitions: Mapping[str, Any], *, root: bool = False) -> None:
    """Every keyword allowed where it stands, every `$ref` naming a definition, `uniqueItems` under a small
    `maxItems`, branches bounded: over the schema as written (each subschema once)."""
    if not isinstance(node, Mapping):
        return  # true / false
    for keyword in node:
        if keyword in KEYWORDS or (root and keyword in _ROOT_ONLY):
            continue
        if keyword in _ROOT_ONLY:
            raise _Refused(False, f"{path}.{keyword}", f"{keyword} may only stand at the root of the schema")
        raise _Refused(
            False,
            f"{path}.{_name(str(keyword))}",
            f"the keyword {_name(str(keyword))!r} is not supported in tool schemas (supported: "
            f"{', '.join(sorted(KEYWORDS - {'x-kagent-format'}))})",
        )
    if root and "$schema" in node and str(node["$schema"]).rstrip("#") != DIALECT:
        raise _Refused(False, f"{path}.$schema", f"$schema may only be {DIALECT} (or left out)")
    if "$ref" in node:
        _reference(node["$ref"], definitions, f"{path}.$ref")
    if node.get("uniqueItems") is True:
        limit = node.get("maxItems")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit > MAX_UNIQUE_ITEMS:
            raise _Refused(
                True,
                f"{path}.uniqueItems",
                f"uniqueItems needs a maxItems of at most {MAX_UNIQUE_ITEMS} next to it",
            )
    for keyword in _SCHEMA_LIST & node.keys():
        if len(node[keyword]) > MAX_BRANCHES:
            raise _Refused(True, f"{path}.{keyword}", f"{keyword} has more than {MAX_BRANCHES} branches")
    for child, child_path in _subschemas(node, path):
        _check_keywords(child, child_path, definitions)


class _Expansion:
    """Subschemas and depth of the schema with every `$ref` expanded, each definition measured once (memoised),
    stopping at the first limit passed: a fan-out of references costs one visit per definition, not per path."""

    def __init__(self, definitions: Mapping[str, Any], at: str) -> None:
        self.definitions = definitions
        self.at = at
        self.measured: dict[str, tuple[int, int]] = {}
        self.open: list[str] = []  # definitions being measured, outermost first

    def measure(self, node: Any, path: str) -> tuple[int, int]:
        if not isinstance(node, Mapping):
            return 1, 1
        size, depth = 1, 0
        parts = list(_subschemas(node, path))
        if "$ref" in node:
            parts.append((None, f"{path}.$ref"))
        for child, child_path in parts:
            if child is None:
                child_size, child_depth = self.definition(_reference(node["$ref"], self.definitions, child_path))
            else:
                child_size, child_depth = self.measure(child, child_path)
            size, depth = size + child_size, max(depth, child_depth)
            if size > MAX_EXPANDED_SUBSCHEMAS:
                raise _Refused(
                    True,
                    path,
                    f"with its $refs expanded the schema has more than {MAX_EXPANDED_SUBSCHEMAS} subschemas here "
                    "(references that fan out)",
                )
        if depth + 1 > MAX_DEPTH:
            raise _Refused(True, path, f"the schema is more than {MAX_DEPTH} levels deep here, $refs expanded")
        return size, depth + 1

    def definition(self, key: str) -> tuple[int, int]:
        if key in self.measured:
            return self.measured[key]
        path = f"{self.at}.{key.replace('/', '.', 1)}"
        if key in self.open:
            cycle = " → ".join([*self.open[self.open.index(key) :], key])
            message = f"the references form a cycle ({_name(cycle)}); recursive schemas aren't supported"
            raise _Refused(True, path, message)
        self.open.append(key)
        self.measured[key] = self.measure(self.definitions[key], path)
        self.open.pop()
        return self.measured[key]


def _problem(schema: Any, text: str) -> SchemaProblem | None:
    """The first problem of `schema` (paths from "$"), or None."""
    try:
        if len(text.encode()) > MAX_SCHEMA_BYTES:
            raise _Refused(True, "$", f"the schema is more than {MAX_SCHEMA_BYTES // 1024} KiB of JSON")
        if not isinstance(schema, Mapping):
            raise _Refused(False, "$", "the schema must be a JSON object")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise _Refused(False, exc.json_path, f"not a valid JSON Schema: {str(exc.message)[:200]}") from None
        definitions: dict[str, Any] = {}
        for where in _DEFINITIONS:
            for name, definition in (schema.get(where) or {}).items():
                definitions[f"{where}/{name}"] = definition
        _check_keywords(schema, "$", definitions, root=True)
        for key, definition in definitions.items():
            _check_keywords(definition, f"$.{key.replace('/', '.', 1)}", definitions)
        expansion = _Expansion(definitions, "$")
        expansion.measure(schema, "$")
        for key in definitions:  # unreferenced ones too: a definition is checked like the rest
            expansion.definition(key)
    except _Refused as refused:
        return refused.problem
    except RecursionError:
        return SchemaProblem(True, "$", "the schema is nested too deeply")
    return None


# Checked schemas by digest: the policy check asks before every call, mostly about the same few schemas.
_CACHE_SIZE = 512
_checked: OrderedDict[str, SchemaProblem | None] = OrderedDict()
_checked_lock = threading.Lock()


def tenant_schema_problem(schema: Any, *, at: str = "$") -> SchemaProblem | None:
    """Why `schema` is outside the bounds for tenant schemas (its path under `at`, the caller's JSON path of the
    schema), or None when it is within them."""
    try:
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return SchemaProblem(False, at, "the schema is not JSON")
    digest = hashlib.sha256(text.encode()).hexdigest()
    with _checked_lock:
        if digest in _checked:
            _checked.move_to_end(digest)
            problem = _checked[digest]
            return None if problem is None else _under(problem, at)
    problem = _problem(schema, text)
    with _checked_lock:
        _checked[digest] = problem
        while len(_checked) > _CACHE_SIZE:
            _checked.popitem(last=False)
    return None if problem is None else _under(problem, at)


def _under(problem: SchemaProblem, at: str) -> SchemaProblem:
    return replace(problem, path=at + problem.path[1:])


# --- an MCP server's input schema in an earlier dialect ---------------------------------------------------------
# MCP input schemas are JSON Schema 2020-12 unless they say otherwise, and many say draft-07: the official TypeScript
# SDK converts its zod schemas with a draft-07 `$schema`. Within the keywords the bounds allow, draft-07 reads the
# same as 2020-12 but for an array `items` (2020-12's `prefixItems`, with `additionalItems` becoming `items`), so such
# a schema is read as 2020-12 before the bounds judge it. Anything else stands as written, and the bounds decide.

EARLIER_DIALECTS = frozenset(
    {"http://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema",
     "http://json-schema.org/draft-06/schema", "https://json-schema.org/draft-06/schema"}
)  # fmt: skip
_CONVERT_DEPTH = 64  # deeper than the bounds allow anyway: left as it is, for them to refuse


def _as_2020_12(node: Any, depth: int) -> Any:
    if not isinstance(node, dict) or depth > _CONVERT_DEPTH:
        return node
    out = dict(node)
    if isinstance(out.get("items"), list):
        out["prefixItems"] = out.pop("items")
        if "additionalItems" in out:
            out["items"] = out.pop("additionalItems")
    for keyword, value in out.items():
        if keyword in _ONE_SCHEMA:
            out[keyword] = _as_2020_12(value, depth + 1)
        elif keyword in _SCHEMA_LIST and isinstance(value, list):
            out[keyword] = [_as_2020_12(item, depth + 1) for item in value]
        elif (keyword in _SCHEMA_MAP or keyword in _DEFINITIONS) and isinstance(value, dict):
            out[keyword] = {name: _as_2020_12(item, depth + 1) for name, item in value.items()}
    return out


def as_2020_12(schema: Any) -> Any:
    """`schema` read as JSON Schema 2020-12 when it declares draft-07 or draft-06 (its `$schema` dropped, array
    `items` as `prefixItems`); as it is otherwise."""
    if not isinstance(schema, dict) or str(schema.get("$schema", "")).rstrip("#") not in EARLIER_DIALECTS:
        return schema
    converted = _as_2020_12(schema, 0)
    converted.pop("$schema", None)
    return converted
