"""Every regular expression of the product (kagent, agents, tools, runs, dashboard) is either reviewed as linear or
runs with a time limit (issue #13): Python's `re` has no timeout and ignores signals while it matches, and most of
what the product matches is someone else's text (a model's answer, an upstream's body, a tenant's schema, a request).

The code is read with `ast`, not grepped. A regex site is a call of `re.*`/`regex.*` that takes a pattern
(compile, match, search, fullmatch, findall, finditer, split, sub, subn), a `"pattern"` or `"patternProperties"`
in a JSON Schema written in the code (jsonschema runs them with `re`), a URL converter's `regex`, or a `re_path`.
Each site is accepted when
- it runs on the `regex` module with `timeout=` (for a `regex.compile`d pattern: every use of it passes `timeout=`), or
- its pattern, evaluated in its module, is in REVIEWED below (with why it is linear), and the code where it is
  written carries a `# linear: …` comment on its lines or the line above.
A new expression fails this test until it is reviewed or bounded. `import re as …`, `from re import …` (and the same
for `regex`) are refused, so that no use escapes the walk. Each reviewed pattern is also run against hostile text
built from its own words and characters, and must finish in time.
"""

from __future__ import annotations

import ast
import importlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "kagent",
    "guard",
    "tools",
    "llm",
    "agents",
    "hooks",
    "conversations",
    "desk",
    "runs",
    "checks",
    "dashboard",
)
MATCHING = frozenset({"compile", "match", "search", "fullmatch", "findall", "finditer", "split", "sub", "subn"})
REGEX_MODULES = frozenset({"re", "regex"})

# pattern -> why it is linear. Keep the reason to one line; the same words go in the comment where it is written.
REVIEWED: dict[str, str] = {
    # An anchored pattern ends on `(?!\n)$`, never a bare `$` (which also matches before a final newline, in `re`
    # and in jsonschema's re.search) nor `\Z` (not ECMA-262: the OpenAPI document carries some of them).
    # kagent
    r"^[A-Z][A-Z0-9_]{0,63}(?!\n)$": "anchored, one class, at most 64 characters",
    r"^(?=.{1,253}(?!\n)$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+(?!\n)$": (
        "anchored; each label starts on a literal dot its class excludes, at most 63 characters"
    ),
    r"^ka_(sk|pk)_[A-Za-z0-9_-]{43}(?!\n)$": "anchored, fixed length",
    r"^[a-z]{2,5}_[0-9a-z]{26}(?!\n)$": "anchored, bounded length",
    r"[a-z]{2,5}_[0-9a-z]{26}": "bounded length, literal separator",
    r"[^/\x00-\x1f\x7f]{1,200}": "one class, at most 200 characters",
    r"^[A-Za-z0-9_.:-]{1,255}(?!\n)$": "anchored, one class, bounded",
    r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}(?!\n)$": "anchored, one class, bounded",
    r"^[\x20-\x7e\t]{0,8192}(?!\n)$": "anchored, one class, bounded",
    r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?!\n)$": "anchored, at most 63 characters",
    r"^(?:0x[0-9a-f]*|[0-9]+)(?!\n)$": "anchored, one class per branch",
    r"^(?:0|[1-9][0-9]{0,2})(?!\n)$": "anchored, at most 3 characters",
    r"^[\x21-\x7e]+(?!\n)$": "anchored, one class",
    r"^v1(?:/.*)?$": "anchored, a literal then anything",
    r"[\\%&\uFF01-\uFF5E\p{Cc}\p{Cf}\p{Cs}\uFE00-\uFE0F\U000E0100-\U000E01EF\u115F\u1160\u3164\uFFA0\u034F]": (
        "one character class: one character per attempt"
    ),
    r"^[^\x00-\x1f\x7f]+(?!\n)$": "anchored, one class",
    # tools
    r"^[\x20-\x7e]*(?!\n)$": "anchored, one class",
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?!\n)$": "anchored, numbers split by literal dots",
    r"[\s_\-]+": "one class, repeated",
    r"[\s\-]+": "one class, repeated",
    r"\{\{([A-Za-z0-9_.]*)\}\}": "literal braces around a class that excludes them",
    r"^[A-Za-z_][A-Za-z0-9_]*(?!\n)$": "anchored, one class",
    r"^[A-Za-z_][A-Za-z0-9_]{0,63}(?!\n)$": "anchored, one class, bounded",
    r"^[a-z][a-z0-9_]{0,63}(?!\n)$": "anchored, one class, bounded",
    r"^[a-z][a-z0-9_]{0,29}(?!\n)$": "anchored, one class, bounded",
    r"^[a-z0-9_]{1,62}(?!\n)$": "anchored, one class, bounded",
    r"^[a-z][a-z0-9_]{0,19}(?!\n)$": "anchored, one class, bounded",
    r"^[a-z][a-z0-9_]{0,47}(?!\n)$": "anchored, one class, bounded",
    r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}(?!\n)$": "anchored, one class, bounded",
    r"^(?!-)[a-z0-9-]{1,63}(?<!-)(?!\n)$": "anchored, one class, bounded",
    r"^https://(?P<host>[^/:?#{}\s]+)(?::(?P<port>[0-9]{1,5}))?(?P<rest>/.*)?(?!\n)$": (
        "anchored; the host class excludes the ':' and '/' that end it"
    ),
    r"%(?![0-9A-Fa-f]{2})": "a literal and a fixed look-ahead",
    # agents
    r"^https://": "anchored literal",
    r"^([01][0-9]|2[0-3]):[0-5][0-9](?!\n)$": "anchored, fixed length",
    r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)(?!\n)$": "anchored, fixed length",
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(?!\n)$": "anchored, fixed length",
    r"\S": "one character",
    # runs
    r"\w+": "one class, repeated",
    r"-?\d+(?:\.\d+)?": "digits taken whole; the fraction starts on a literal dot",
    r"[\s,;:!?()\"']+": "one class, repeated",
    r"""\bname\s*=\s*(?:"([^"]{0,200})"|'([^']{0,200})')""": (
        "a literal, two runs of one class around a literal, then a bounded run of a class the quote ends"
    ),
    r'"name"\s*:\s*"([^"\\]{1,200})"': (
        "a literal, two runs of one class around a literal, then a bounded run of a class the quote ends"
    ),
    r"[^A-Za-z0-9_-]+": "one class, repeated",
    # the API's query parameters and the dashboard
    r"[0-9]{1,12}": "one class, at most 12 characters",
    r"^[A-Za-z_][A-Za-z0-9_\-]*$": "anchored, one class",
    r"[\s,]+": "one class, repeated",
    r"[^A-Za-z0-9_]+": "one class, repeated",
    r"^settings/signing-secret/(?P<which>tool|end-user)/reveal/$": "anchored literals and a fixed choice",
    r"^settings/signing-secret/(?P<which>tool|end-user)/rotate/$": "anchored literals and a fixed choice",
    # agents/knowledge
    r"^ {0,3}(={3,}|-{3,})[ \t]*$": "anchored; the underline's class and the trailing blanks' class don't overlap",
    r"^ {0,3}(```|~~~)": "anchored, a bounded run of spaces and a fixed literal",
    r"(?<=[.!?؟۔…])\s+|\n+": "one character class after a one-character look-behind, or one class",
    r"(\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|`+)": "short alternatives with one-character look-arounds",
    r"[^.!?؟۔…\n]*(?:[.!?؟۔…]+|\n|$)": "a run of one class, then a terminator it excludes, a newline or the end",
    r"[^\W\d_]+|\d+": "two disjoint classes, each taken whole",
    r"[\u0600-\u06ff]": "one character",
}

# Sites whose `# linear:` comment belongs in a file its owner is rewriting now: (path, pattern). The pattern is
# still reviewed above; add the comment there and remove the entry here.
COMMENT_PENDING: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Site:
    path: str  # relative to the repository
    line: int
    end_line: int
    module: str
    kind: str  # "call", "schema", "converter", "re_path"
    pattern_node: ast.expr | None
    bounded: bool  # runs with a time limit
    compiled_name: str = ""  # NAME for `NAME = regex.compile(...)` at module level

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def _product_files() -> Iterator[tuple[Path, str]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            yield path, ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _regex_call(node: ast.AST) -> tuple[str, str] | None:
    """("re" | "regex", function) for a call like re.search(...)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in REGEX_MODULES
        and node.func.attr in MATCHING
    ):
        return node.func.value.id, node.func.attr
    return None


def _has_timeout(call: ast.Call) -> bool:
    return any(keyword.arg == "timeout" for keyword in call.keywords)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _schema_sites(node: ast.Dict, parents: dict[ast.AST, ast.AST]) -> Iterator[tuple[str, ast.expr]]:
    parent = parents.get(node)
    if isinstance(parent, ast.Dict):  # a message table keyed by keyword (x-messages) holds no patterns
        for key, value in zip(parent.keys, parent.values, strict=True):
            if value is node and isinstance(key, ast.Constant) and key.value == "x-messages":
                return
    for key, value in zip(node.keys, node.values, strict=True):
        if not isinstance(key, ast.Constant):
            continue
        if key.value == "pattern":
            yield "schema", value
        elif key.value == "patternProperties" and isinstance(value, ast.Dict):
            for inner in value.keys:
                if inner is not None:
                    yield "schema", inner


def _sites() -> tuple[list[Site], list[str]]:
    sites: list[Site] = []
    refused: list[str] = []
    compiled: dict[str, Site] = {}
    uses: dict[str, list[tuple[str, bool]]] = {}
    for path, module in _product_files():
        rel = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(), rel)
        parents = _parents(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in REGEX_MODULES and alias.asname not in (None, alias.name):
                        refused.append(f"{rel}:{node.lineno}: import {alias.name} as {alias.asname}")
            elif isinstance(node, ast.ImportFrom) and node.module in REGEX_MODULES:
                refused.append(f"{rel}:{node.lineno}: from {node.module} import …")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
                refused.append(f"{rel}:{node.lineno}: __import__")
            found = _regex_call(node)
            if found is not None:
                assert isinstance(node, ast.Call)
                library, function = found
                statement = node
                while not isinstance(statement, ast.stmt):
                    statement = parents[statement]
                pattern = (
                    node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "pattern"), None)
                )
                name = ""
                if (
                    library == "regex"
                    and function == "compile"
                    and isinstance(statement, ast.Assign | ast.AnnAssign)
                    and parents.get(statement) is tree
                ):
                    target = statement.targets[0] if isinstance(statement, ast.Assign) else statement.target
                    name = target.id if isinstance(target, ast.Name) else ""
                site = Site(
                    rel,
                    statement.lineno,
                    statement.end_lineno or statement.lineno,
                    module,
                    "call",
                    pattern,
                    library == "regex" and _has_timeout(node),
                    name,
                )
                sites.append(site)
                if name:
                    compiled[name] = site
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if isinstance(owner, ast.Name) and node.func.attr in MATCHING - {"compile"}:
                    uses.setdefault(owner.id, []).append((f"{rel}:{node.lineno}", _has_timeout(node)))
            if isinstance(node, ast.Dict):
                for kind, value in _schema_sites(node, parents):
                    line = value.lineno
                    sites.append(Site(rel, line, value.end_lineno or line, module, kind, value, False))
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "regex" for t in item.targets
                    ):
                        end = item.end_lineno or item.lineno
                        sites.append(Site(rel, item.lineno, end, module, "converter", item.value, False))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "re_path":
                sites.append(
                    Site(rel, node.lineno, node.end_lineno or node.lineno, module, "re_path", node.args[0], False)
                )
    # A regex.compile'd pattern is time-limited when every use of it passes timeout=.
    out = []
    for site in sites:
        if site.compiled_name and uses.get(site.compiled_name) and all(t for _, t in uses[site.compiled_name]):
            site = Site(**{**site.__dict__, "bounded": True})
        out.append(site)
    return out, refused


_NOT_A_PATTERN = object()


def _pattern_text(site: Site) -> Any:
    """The site's pattern as a string, evaluated in its module (constants, f-strings of constants, X.pattern);
    None when it can't be (a local variable); _NOT_A_PATTERN for a "pattern" key that maps to code (jsonschema's
    keyword table in tools/arguments.py)."""
    if site.pattern_node is None:
        return None
    module = importlib.import_module(site.module)
    expression = ast.fix_missing_locations(ast.Expression(body=site.pattern_node))
    try:
        value = eval(compile(expression, site.path, "eval"), vars(module))  # noqa: S307 - our own code's constants
    except Exception:  # noqa: BLE001 - a local variable: not a constant pattern
        return None
    if callable(value) and site.kind == "schema":
        return _NOT_A_PATTERN
    return value if isinstance(value, str) else None


def _writes_a_literal(site: Site) -> bool:
    return site.pattern_node is not None and any(
        isinstance(node, ast.Constant) and isinstance(node.value, str) for node in ast.walk(site.pattern_node)
    )


def _has_linear_comment(site: Site) -> bool:
    lines = (ROOT / site.path).read_text().splitlines()
    window = lines[max(site.line - 2, 0) : site.end_line]
    return any("#" in line and "linear:" in line.split("#", 1)[1] for line in window)


SITES, REFUSED_IMPORTS = _sites()


def test_the_walk_finds_the_sites_it_is_meant_to():
    # A walk that finds nothing passes everything: hold it to what is known to be there.
    where = {site.where().split(":")[0] for site in SITES}
    assert {"llm/demo.py", "tools/arguments.py", "kagent/masking.py"} <= where
    assert {"agents/config.py", "kagent/converters.py", "kagent/urls.py"} <= where
    assert len(SITES) >= 50


def test_no_import_hides_a_regex_use():
    assert REFUSED_IMPORTS == []


def test_every_regex_is_reviewed_as_linear_or_runs_with_a_time_limit():
    problems = []
    for site in SITES:
        if site.bounded:
            continue
        pattern = _pattern_text(site)
        if pattern is _NOT_A_PATTERN:
            continue
        if pattern is None:
            problems.append(f"{site.where()}: not a constant pattern; run it on `regex` with timeout=")
        elif pattern not in REVIEWED:
            problems.append(f"{site.where()}: {pattern!r} is not reviewed: prove it linear (REVIEWED) or bound it")
        elif _writes_a_literal(site) and (site.path, pattern) not in COMMENT_PENDING and not _has_linear_comment(site):
            problems.append(f"{site.where()}: say why {pattern!r} is linear in a `# linear: …` comment there")
    assert problems == []


def test_the_reviewed_list_holds_only_what_is_used():
    used = {_pattern_text(site) for site in SITES if not site.bounded}
    assert sorted(set(REVIEWED) - used) == []
    assert {pattern for _, pattern in COMMENT_PENDING} <= used


def _hostile_inputs(pattern: str) -> Iterator[str]:
    """Text built to make a backtracking pattern slow: its own words and characters, long runs of them, and the
    classics (whitespace, digits, word characters) between a start and a spoiler."""
    words = sorted(set(re.findall(r"[A-Za-z]{2,}", pattern)))[:20] + ["a", "x", "I", "TKT", "ticket", "0"]
    characters = sorted({ch for ch in pattern if ch.isprintable()} | set(" \t0a.-_:/@%\\"))
    for word in words:
        for filler in (" ", "0", "a", ". ", "\t ", word + " "):
            yield word + filler * (30_000 // len(filler)) + "!"
    for ch in characters:
        yield ch * 30_000 + "\x00"
    for first, second in zip(characters, characters[1:], strict=False):
        yield (first + second) * 15_000 + "\x00"


@pytest.mark.parametrize("pattern", sorted(REVIEWED))
def test_a_reviewed_pattern_stays_fast_on_hostile_text(pattern):
    flags = re.DOTALL if pattern.startswith("^https://(?P<host>") else 0
    try:
        compiled: Any = re.compile(pattern, flags)
    except re.error:
        import regex

        compiled = regex.compile(pattern)
    started = time.monotonic()
    for text in _hostile_inputs(pattern):
        for _ in compiled.finditer(text):
            pass
    assert time.monotonic() - started < 5, pattern  # generous: a polynomial pattern takes minutes here
