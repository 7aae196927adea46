"""The built-in tool registry: one entry per built-in, read by everything that offers, checks, runs or judges one.

An entry is a `BuiltinTool` (tools/builtin_tool.py): what the model is shown (description, parameter schema, how its
invented names and argument names are read), and what the product needs to know of it (its effect; when it is
available: sessions only, searchable knowledge, business hours, one open ticket, a daily limit; the `receipt` of
what it makes, which the truthfulness guard and the chat widget read; the test object a test-panel run leaves) —
plus its executor, the code that runs an allowed call. The policy check, the tool set, the run engine, the
truthfulness guard, the run events and the dashboard read these entries instead of naming built-ins.

Seed "Built-in tools" and "Effects and when tools are available" fix each tool's effect, default, parameters and
enums. Like kdeps' tool definitions, each built-in's model-facing text (description + parameter schema) carries a
semver `version` that must change whenever that text changes (published agent versions record it:
`builtin_versions`); `builtins.lock.json` beside this file pins the hash of the text per version, a test refuses a
change of the text under the same version, and `python -m tools.builtins --update-lock` rewrites it.

Why the executors are bound, not written, here: an executor makes what the app that owns it keeps (the desk's
tickets and handoffs, a session's flag, a search of the agent's knowledge) with the run engine's rows, and those
apps sit above `tools`. The definitions, though, must be whole before any app is ready: the agent config's JSON
Schema, HTTP tool validation (reserved names) and the lock read them at import, without Django. So each entry's
definition lives in tools/builtin_defs.py, and the app that owns what it makes binds its executor to it when the app
is ready (`@executes(CREATE_TICKET)` in desk/executors.py, imported by `DeskConfig.ready`). An executor is typed
against the engine's rows where it is written (`Executor` takes them as `Any` here, the layer below); `unexecuted()`
lists a built-in nobody bound, and Django's system check (tools/apps.py) refuses to start with one.

Adding a built-in: its `BuiltinTool` in tools/builtin_defs.py (and in `_ALL` here), `python -m tools.builtins
--update-lock`, and its executor with `@executes(...)` in the `builtins.py` of the app that owns what it does,
imported by that app's `ready()`. No other code needs its name.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, TypeVar

from kagent.bindings import Binding
from tools.builtin_defs import CREATE_TICKET, FLAG_CONVERSATION, SEARCH_KNOWLEDGE, TRANSFER_TO_HUMAN
from tools.builtin_tool import ArgumentSynonym, BuiltinTool

RULES_HEADING: Final = "This company's rules for this action"
LOCK_PATH: Final = Path(__file__).with_name("builtins.lock.json")
# linear: anchored, numbers split by literal dots
SEMVER_RE: Final = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?!\n)$")


_ALL: Final = (TRANSFER_TO_HUMAN, CREATE_TICKET, FLAG_CONVERSATION, SEARCH_KNOWLEDGE)
# Sorted by name once, so every listing (and a segment's tool set) has one order.
_REGISTRY: Final[Mapping[str, BuiltinTool]] = MappingProxyType({t.name: t for t in sorted(_ALL, key=lambda t: t.name)})
BUILTIN_NAMES: Final[frozenset[str]] = frozenset(_REGISTRY)


def get(name: str) -> BuiltinTool | None:
    """The built-in with exactly this name (no alias resolution: use `resolve_alias` for what a model sends)."""
    return _REGISTRY.get(name)


def all_builtins() -> tuple[BuiltinTool, ...]:
    """Every built-in, sorted by name (the order a segment's tool set uses)."""
    return tuple(_REGISTRY.values())


def versions() -> dict[str, str]:
    """name -> version of each built-in's model-facing text, stored in each published agent version."""
    return {tool.name: tool.version for tool in _REGISTRY.values()}


def receipts() -> dict[str, tuple[str, tuple[str, ...]]]:
    """name -> (the key of its result that holds what it made, the fields of it the customer is shown), for each
    built-in with a receipt."""
    return {tool.name: (str(tool.receipt), tool.receipt.fields) for tool in _REGISTRY.values() if tool.receipt}


# --- the executors ----------------------------------------------------------------------------------------------

# An executor runs one call the policy check allowed and returns exactly what the model is shown; it is called as
# `executor(run, call, arguments)` with the engine's rows (runs.models.Run and ToolCall) inside the transaction that
# records the call, and must be idempotent per `call.pk` (a retry after a crash finds what it already made).
Executor = Callable[[Any, Any, dict[str, Any]], dict[str, Any]]
_E = TypeVar("_E", bound=Executor)
_EXECUTORS: dict[str, Executor] = {}


def executes(tool: BuiltinTool) -> Callable[[_E], _E]:
    """Binds the decorated function as `tool`'s executor (when the app that owns it is ready). One executor per
    built-in: binding another is an error, binding the same one again is nothing."""

    def bind(executor: _E) -> _E:
        if _REGISTRY.get(tool.name) is not tool:
            raise ValueError(f"{tool.name} is not a built-in of this registry")
        bound = _EXECUTORS.setdefault(tool.name, executor)
        if bound is not executor:
            raise ValueError(f"{tool.name} already has an executor: {bound.__module__}.{bound.__qualname__}")
        return executor

    return bind


def executor(name: str) -> Executor:
    """The executor bound to the built-in `name`."""
    try:
        return _EXECUTORS[name]
    except KeyError:
        raise LookupError(f"no executor is bound to the built-in {name!r} (see unexecuted())") from None


def unexecuted() -> list[str]:
    """The built-ins no app bound an executor to (once every app is ready, there are none)."""
    return [name for name in _REGISTRY if name not in _EXECUTORS]


def _loose(name: str) -> str:
    # Case, separators and camelCase don't make a different name: "Transfer-To-Human" is "transferToHuman".
    # linear: one class, repeated
    return re.sub(r"[\s_\-]+", "", name).casefold()


def resolve_alias(name: str, available: Iterable[str], extra_aliases: Mapping[str, str] | None = None) -> str | None:
    """The tool a model means by `name`, among the run's tool set `available`, or None.

    Matching ignores case and separators; a real tool name always wins over an alias; an alias claimed by two
    available tools resolves to neither (kdeps, "Tool aliases"). `extra_aliases` (alias -> tool name) adds aliases
    for non-built-in tools. Aliases of tools not in `available` are ignored.
    """
    names = list(dict.fromkeys(available))
    if name in names:
        return name
    key = _loose(name)
    if not key:
        return None
    real = {n for n in names if _loose(n) == key}
    if real:
        # Two real names that differ only by case or separators: guessing between them could run the wrong tool.
        return real.pop() if len(real) == 1 else None
    available_set = set(names)
    claims: set[str] = set()
    for tool in _REGISTRY.values():
        if tool.name in available_set and any(_loose(alias) == key for alias in tool.aliases):
            claims.add(tool.name)
    for alias, target in (extra_aliases or {}).items():
        if target in available_set and _loose(alias) == key:
            claims.add(target)
    return claims.pop() if len(claims) == 1 else None


def _enum_values(tool: BuiltinTool) -> dict[str, list[str]]:
    return {key: spec["enum"] for key, spec in tool.parameters["properties"].items() if "enum" in spec}


def _fold_enum_value(value: Any, allowed: Sequence[str]) -> Any:
    # "High" or "Customer requested" mean the enum value; anything else is left for strict validation to refuse.
    if isinstance(value, str):
        # linear: one class, repeated
        folded = re.sub(r"[\s\-]+", "_", value.strip()).casefold()
        if folded in allowed:
            return folded
    return value


def normalize_arguments(tool: BuiltinTool, args: dict[str, Any]) -> dict[str, Any]:
    """`args` with the names other models use mapped to the tool's real parameter names (a new dict).

    A real key always wins: a synonym never overwrites a key already present, and one that would is left as is so
    strict validation reports it. Enum values are matched ignoring case and separators. Runs before validation.
    """
    if not isinstance(args, dict):
        # A model that sent a list or a string gets strict validation's answer, not a crash here.
        return args
    properties = tool.parameters["properties"]
    enums = _enum_values(tool)
    real_by_loose = {_loose(key): key for key in properties}
    synonyms: dict[str, list[ArgumentSynonym]] = {}
    for synonym in tool.argument_synonyms:
        synonyms.setdefault(_loose(synonym.name), []).append(synonym)

    result: dict[str, Any] = {key: value for key, value in args.items() if key in properties}
    for key, value in args.items():
        if key in properties:
            continue
        target = real_by_loose.get(_loose(key))
        if target is None:
            for synonym in synonyms.get(_loose(key), []):
                folded = _fold_enum_value(value, enums.get(synonym.target, ()))
                if not synonym.only_enum_values or folded in enums.get(synonym.target, ()):
                    target = synonym.target
                    break
        if target is not None and target not in result:
            result[target] = value
        else:
            result[key] = value
    for key, allowed in enums.items():
        if key in result:
            result[key] = _fold_enum_value(result[key], allowed)
    return result


def with_rules(description: str, rules: str | None) -> str:
    """A tool description followed, when the grant has rules, by the section SPEC §5 names."""
    if rules is None or not rules.strip():
        return description
    return f"{description}\n\n{RULES_HEADING}\n{rules.strip()}"


def model_description(tool: BuiltinTool, rules: str | None) -> str:
    """What the model reads for `tool`: its description, then the grant's rules under `RULES_HEADING`."""
    return with_rules(tool.description, rules)


def function_definition(tool: BuiltinTool, rules: str | None) -> dict[str, Any]:
    """The tool as an OpenAI-style function definition (Chat Completions `tools` entry)."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": model_description(tool, rules),
            "parameters": tool.parameters,
        },
    }


# --- the version lock -------------------------------------------------------------------------------------------

UPDATE_LOCK_COMMAND: Final = "python -m tools.builtins --update-lock"


def _semver(version: str) -> tuple[int, int, int]:
    match = SEMVER_RE.match(version)
    if match is None:
        raise ValueError(f"{version!r} is not a semver version like 1.2.0")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def current_lock() -> dict[str, dict[str, str]]:
    """The lock as the registry stands now: name -> {version, sha256 of the model-facing text}."""
    return {tool.name: {"version": tool.version, "sha256": tool.text_sha256} for tool in _REGISTRY.values()}


def read_lock(path: Path = LOCK_PATH) -> dict[str, dict[str, str]]:
    if not path.exists():
        return {}
    data: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _refusals(locked: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    refusals: dict[str, str] = {}
    for tool in _REGISTRY.values():
        entry = locked.get(tool.name)
        if entry is None:
            continue
        locked_version = str(entry.get("version"))
        if locked_version == tool.version and entry.get("sha256") != tool.text_sha256:
            refusals[tool.name] = (
                f"{tool.name}: its model-facing text (description or parameters) changed but its version is still "
                f"{tool.version}. Bump `version` in tools/builtin_defs.py, then run `{UPDATE_LOCK_COMMAND}`."
            )
        elif locked_version != tool.version and (
            not SEMVER_RE.match(locked_version) or _semver(tool.version) < _semver(locked_version)
        ):
            refusals[tool.name] = (
                f"{tool.name}: version {tool.version} is not above the locked {locked_version}; versions only go up."
            )
    return refusals


def lock_refusals(locked: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Changes `--update-lock` must refuse: text changed under the same version, or a version that went backwards."""
    return list(_refusals(locked).values())


def lock_problems(locked: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Everything that makes `locked` differ from the registry, each with what to do about it."""
    refusals = _refusals(locked)
    problems = list(refusals.values())
    current = current_lock()
    for name, entry in current.items():
        if name in refusals:
            continue
        if name not in locked:
            problems.append(f"{name}: not in the lock file. Run `{UPDATE_LOCK_COMMAND}`.")
        elif dict(locked[name]) != entry:
            problems.append(f"{name}: the lock is stale (version {entry['version']}). Run `{UPDATE_LOCK_COMMAND}`.")
    for name in sorted(set(locked) - set(current)):
        problems.append(f"{name}: in the lock file but not a built-in. Run `{UPDATE_LOCK_COMMAND}`.")
    return problems


def write_lock(path: Path = LOCK_PATH) -> list[str]:
    """Rewrite the lock from the registry; refuses (returns the reasons, writes nothing) per `lock_refusals`."""
    refusals = lock_refusals(read_lock(path))
    if refusals:
        return refusals
    path.write_text(json.dumps(current_lock(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return []


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.builtins", description="The built-in tools' version lock.")
    parser.add_argument("--update-lock", action="store_true", help="rewrite the lock file from the registry")
    parser.add_argument("--lock-file", type=Path, default=LOCK_PATH, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.update_lock:
        refusals = write_lock(options.lock_file)
        for line in refusals:
            print(f"refused: {line}", file=sys.stderr)
        if not refusals:
            print(f"wrote {options.lock_file}")
        return 1 if refusals else 0
    problems = lock_problems(read_lock(options.lock_file))
    for line in problems:
        print(line, file=sys.stderr)
    if not problems:
        print("lock is up to date")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())


# --- what the built-ins' owner tells the engine -------------------------------------------------------------------


@dataclass(frozen=True)
class DeskFacts:
    """What the engine and the conversation ask of the app that owns `transfer_to_human` and `create_ticket` (the
    desk, which binds them when it is ready, as it binds their executors): the policy check's ticket facts, the
    truthfulness guard's ticket numbers and handoff, and the handoffs a conversation handed back or closed closes.
    The engine never imports the desk: the desk builds on the run, the run is told through this."""

    # The display number of the customer's open ticket, or None (test-panel runs see test objects only).
    open_ticket_number: Callable[..., str | None]  # (project_id=, rate_key=, is_test=)
    tickets_since: Callable[..., int]  # (project_id=, rate_key=, is_test=, since=)
    ticket_numbers: Callable[..., list[int]]  # (project_id=, rate_key=, is_test=)
    handed_off: Callable[..., bool]  # (project_id=, session_id=): a handoff of the session is open
    # Inside the caller's transaction, with the session's row held: its open handoffs close (`handoff.closed`).
    close_handoffs: Callable[[str], None]


DESK: Binding[DeskFacts] = Binding("the desk's facts")


def bind_desk(facts: DeskFacts) -> None:
    """Binds the desk's facts (once: binding others is an error, the same again is nothing)."""
    DESK.bind(facts)


def desk() -> DeskFacts:
    """The desk's facts, bound when its app is ready."""
    return DESK.get()
