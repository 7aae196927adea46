"""The placeholder grammar of HTTP tool templates, shared by write-time validation and call-time rendering.

    {{args.NAME}}  {{end_user.external_id}}  {{end_user.traits.KEY}}  {{secret.NAME}}  {{var.NAME}}

No spaces, no filters, nothing else: any other `{{` or `}}` in a template is an error (`invalid_template`), and a
well-formed placeholder with another root (`sys`, `env`, …) is `unknown_placeholder`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ROOTS = ("args", "end_user", "secret", "var")
RESERVED_NAMES = frozenset({"args", "end_user", "secret", "var", "sys"})

# What may sit between the braces at all; finer rules per root below.
# linear: literal braces around a class that excludes them
_TOKEN_RE = re.compile(r"\{\{([A-Za-z0-9_.]*)\}\}")
# linear: anchored, one class
_SEGMENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?!\n)$")
# linear: anchored, one class, at most 64 characters
SECRET_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}(?!\n)$")
# linear: anchored, one class, bounded
TRAIT_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}(?!\n)$")
# linear: anchored, one class, bounded
VARIABLE_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}(?!\n)$")
# linear: anchored, one class, bounded
PARAMETER_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}(?!\n)$")


class PlaceholderError(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Placeholder:
    raw: str  # the whole "{{…}}" text
    root: str  # args | end_user | secret | var
    name: str  # parameter / secret / variable name, "external_id", or the trait key
    start: int
    end: int

    @property
    def is_trait(self) -> bool:
        # From the text, not the name: {{end_user.traits.external_id}} is a trait, not the external id.
        return self.root == "end_user" and self.raw.startswith("{{end_user.traits.")


def _parse_one(inner: str, raw: str, start: int, end: int) -> Placeholder:
    parts = inner.split(".")
    if len(parts) < 2 or not all(_SEGMENT_RE.match(p) for p in parts):
        raise PlaceholderError("invalid_template", f"{raw} is not a well-formed placeholder")
    root = parts[0]
    if root not in ROOTS:
        raise PlaceholderError(
            "unknown_placeholder", f"{raw}: unknown placeholder root {root!r} (use args, end_user, secret or var)"
        )
    if root == "end_user":
        if parts[1:] == ["external_id"]:
            return Placeholder(raw, root, "external_id", start, end)
        if len(parts) == 3 and parts[1] == "traits" and TRAIT_KEY_RE.match(parts[2]):
            return Placeholder(raw, root, parts[2], start, end)
        raise PlaceholderError("unknown_placeholder", f"{raw}: end_user offers only external_id and traits.<key>")
    if len(parts) != 2:
        raise PlaceholderError("invalid_template", f"{raw}: {root} placeholders have exactly one name")
    name = parts[1]
    if root == "secret" and not SECRET_NAME_RE.match(name):
        raise PlaceholderError("invalid_template", f"{raw}: secret names are upper case, like ORDERS_TOKEN")
    if root == "var" and not VARIABLE_NAME_RE.match(name):
        raise PlaceholderError("invalid_template", f"{raw}: variable names are lower case, like store_id")
    if root == "args" and not PARAMETER_NAME_RE.match(name):
        raise PlaceholderError("invalid_template", f"{raw}: parameter names are lower case, like order_number")
    return Placeholder(raw, root, name, start, end)


def parse(template: str) -> list[Placeholder]:
    """Every placeholder in `template`, in order. Raises PlaceholderError on anything malformed."""
    found: list[Placeholder] = []
    pos = 0
    for match in _TOKEN_RE.finditer(template):
        _check_no_braces(template[pos : match.start()])
        if template[match.start() - 1 : match.start()] == "{" or template[match.end() : match.end() + 1] == "}":
            raise PlaceholderError("invalid_template", f"stray brace next to {match.group(0)}")
        found.append(_parse_one(match.group(1), match.group(0), match.start(), match.end()))
        pos = match.end()
    _check_no_braces(template[pos:])
    return found


def _check_no_braces(literal: str) -> None:
    if "{{" in literal or "}}" in literal:
        raise PlaceholderError("invalid_template", "unbalanced or malformed '{{' / '}}' in template")


def split(template: str) -> list[str | Placeholder]:
    """The template as literal strings and placeholders, alternating as they appear."""
    out: list[str | Placeholder] = []
    pos = 0
    for ph in parse(template):
        if ph.start > pos:
            out.append(template[pos : ph.start])
        out.append(ph)
        pos = ph.end
    if pos < len(template):
        out.append(template[pos:])
    return out
