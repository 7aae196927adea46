"""The policy check: one function of (run facts, tool call) that runs before every tool call of every kind.

Seed, "The policy check" — in this order; the first failure answers the model
`{"ok": false, "error": {"code", "guidance"}}` and nothing runs:

1. the tool is in the run's tool set and `tools.enabled` is on            tool_not_available
2. the arguments validate strictly against the tool's JSON Schema         invalid_arguments
3. a tool that needs a verified user has one                              verified_user_required
4. available now: business hours, knowledge present, no open ticket       outside_business_hours, not_available,
                                                                           ticket_already_open
5. the same tool with the same arguments hasn't already succeeded         duplicate_call
6. the run hasn't been cancelled or superseded                            run_cancelled
7. per-user limits: HTTP tools 20 an hour, create_ticket 5 a day          rate_limited
8. round budget not used up; at most 5 calls a round                      round_budget_exhausted, too_many_calls

Each row is one step function in `POLICY_STEPS`, in that order. Tool names the model invents are resolved through
aliases before step 1, argument names through synonyms before step 2 (a real key always wins). What a built-in needs
(sessions only, business hours, one open ticket, a daily limit) is declared on its `BuiltinTool`, not named here.
This module decides; it never runs a tool and never writes.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from tools import builtins
from tools.arguments import UncheckableArguments, argument_errors
from tools.builtin_tool import Effect
from tools.template_values import TEXT_MAX, is_token
from tools.template_values import normalize_arguments as normalize_digits_in
from tools.toolset import ToolKind, ToolSpec

HTTP_CALLS_PER_HOUR = 20
# The kinds that call the business's systems: their calls count together toward HTTP_CALLS_PER_HOUR.
CALLS_OUT: Final = frozenset({ToolKind.HTTP, ToolKind.MCP})
MAX_CALLS_PER_ROUND = 5


@dataclass(frozen=True)
class PolicyContext:
    """What the check needs to know about the run at the moment of the call. Lookups are callables so only the
    checks that are reached cost a query."""

    tools_enabled: bool
    tool_set: tuple[ToolSpec, ...]
    verified: bool
    has_session: bool
    actions_paused: Callable[[], bool]  # live: the agent's switch now, not when the segment started
    business_hours: dict[str, Any] | None
    now: datetime.datetime
    round: int
    max_rounds: int
    index_in_round: int
    cancelled: bool
    succeeded: frozenset[tuple[str, str]]  # (tool name, arguments hash) that already succeeded in this run
    open_ticket_number: Callable[[], str | None] = lambda: None
    has_searchable_knowledge: Callable[[], bool] = lambda: True
    http_calls_last_hour: Callable[[], int] = lambda: 0
    tickets_last_day: Callable[[], int] = lambda: 0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    name: str  # the resolved tool name ("" when nothing matched)
    arguments: Any  # the arguments after synonyms (what validation saw)
    arguments_hash: str = ""
    code: str = ""
    guidance: str = ""
    spec: ToolSpec | None = None  # None when the tool is not in the tool set

    def model_result(self) -> dict[str, Any]:
        return {"ok": False, "error": {"code": self.code, "guidance": self.guidance}}


def _squeezed(value: Any) -> Any:
    """Strings with every run of whitespace as one space, trimmed: " Late  order " is the same call as "Late order"."""
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, list):
        return [_squeezed(v) for v in value]
    if isinstance(value, dict):
        return {k: _squeezed(v) for k, v in value.items()}
    return value


def arguments_hash(arguments: Any) -> str:
    squeezed = _squeezed(arguments)
    return hashlib.sha256(json.dumps(squeezed, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


# Deeper than any tool's parameters go: everything after the parse (the hash, the schema, the templating) walks
# the arguments recursively, so they are bounded here, where a refusal is a clear invalid_arguments.
MAX_ARGUMENT_DEPTH = 32


def _depth(value: Any) -> int:
    deepest, level = 0, [(value, 1)]
    while level:
        node, depth = level.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_ARGUMENT_DEPTH:
            break
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        level.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def parse_arguments(raw: str) -> tuple[Any, str | None]:
    """The model's JSON arguments, or an explanation of why they aren't JSON. Empty means {}."""
    if raw is None or not str(raw).strip():
        return {}, None
    try:
        value = json.loads(raw)
        # Valid JSON can still hold what UTF-8 can't ("\ud800", also as a key): refused here, not raised later.
        json.dumps(value, ensure_ascii=False).encode()
    except (ValueError, TypeError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        return None, f"The arguments are not valid JSON ({exc.__class__.__name__}). Send a JSON object."
    if _depth(value) > MAX_ARGUMENT_DEPTH:
        return None, f"The arguments are nested more than {MAX_ARGUMENT_DEPTH} levels deep. Send a flat JSON object."
    return value, None


def _normalized(spec: ToolSpec | None, arguments: Any) -> Any:
    """The arguments with synonyms mapped (built-ins) or Arabic-Indic digits as ASCII (HTTP tools)."""
    if spec is None or not isinstance(arguments, dict):
        return arguments
    if spec.builtin is not None:
        return builtins.normalize_arguments(spec.builtin, arguments)
    if spec.kind in CALLS_OUT:
        # Seed: Arabic-Indic digits are converted to ASCII before checks (٨٨١٢ and 8812 are the same order number).
        return normalize_digits_in(arguments)
    return arguments


@dataclass(frozen=True)
class PolicyCall:
    """One tool call as the steps see it: the name after aliases, the arguments before and after synonyms."""

    requested_name: str
    name: str  # resolved through aliases ("" when nothing matched)
    spec: ToolSpec | None  # the tool set's entry for `name`
    sent_arguments: Any  # as parsed from the model's JSON (None when it isn't JSON)
    parse_problem: str | None
    arguments: Any  # after synonyms: what validation and everything after it sees

    @property
    def offered(self) -> ToolSpec:
        """The tool set's entry: every step after `in_the_tool_set` may rely on it."""
        if self.spec is None:
            raise LookupError(f"{self.requested_name[:64]!r} is not in the tool set; in_the_tool_set comes first")
        return self.spec

    def refuse(self, code: str, guidance: str) -> Decision:
        return Decision(False, self.name, self.arguments, arguments_hash(self.arguments), code, guidance, self.spec)


PolicyStep = Callable[[PolicyContext, PolicyCall], Decision | None]


# --- 1. in the run's tool set, with tools switched on ------------------------------------------------------------


def in_the_tool_set(ctx: PolicyContext, call: PolicyCall) -> Decision | None:
    if ctx.tools_enabled and call.spec is not None:
        return None
    available = [spec.name for spec in ctx.tool_set]
    offered = ", ".join(available) if available and ctx.tools_enabled else "none"
    guidance = (
        f"There is no tool named {call.requested_name[:64]!r} in this conversation (tools offered: {offered}). "
        "Answer without it, or use one of the offered tools."
    )
    # Nothing was matched to a tool, so nothing was read the tool's way: the arguments as sent, no spec.
    return Decision(
        False, call.name, call.sent_arguments, arguments_hash(call.sent_arguments), "tool_not_available", guidance
    )


# --- 2. strict validation (after synonyms; a real key wins) ------------------------------------------------------


def _format_errors(spec: ToolSpec, arguments: dict[str, Any]) -> list[str]:
    problems = []
    for key, schema in spec.parameters.get("properties", {}).items():
        value = arguments.get(key)
        if value is None or isinstance(value, bool):
            continue
        text = str(value)
        if schema.get("x-kagent-format", "token") == "token":
            if not is_token(text):
                problems.append(f"{key}: use only letters, digits, spaces and . _ @ : + - (at most 64 characters)")
        elif len(text) > TEXT_MAX:
            problems.append(f"{key}: at most {TEXT_MAX} characters")
    return problems


def _schema_problems(spec: ToolSpec, arguments: Any) -> list[str]:
    schema = dict(spec.parameters)
    schema.setdefault("additionalProperties", False)  # strict: no argument the schema doesn't name
    problems = []
    try:
        errors = sorted(argument_errors(schema, arguments), key=lambda e: list(map(str, e.absolute_path)))
    except UncheckableArguments as exc:  # a $ref out of the schema, a pattern too slow for its budget: runs nothing
        return [f"{exc.message}; this tool can't be used with these arguments right now"]
    except Exception:  # a tenant schema that can't be evaluated otherwise runs nothing either
        return ["the tool's parameter schema can't be checked; this tool can't be used right now"]
    for error in errors:
        where = ".".join(map(str, error.absolute_path)) or "arguments"
        message = error.message if len(error.message) < 160 else error.message[:159] + "…"
        problems.append(f"{where}: {message}")
    return problems[:5]


def arguments_valid(ctx: PolicyContext, call: PolicyCall) -> Decision | None:
    if call.parse_problem:
        return call.refuse("invalid_arguments", call.parse_problem)
    problems = _schema_problems(call.offered, call.arguments)
    if not problems and call.offered.kind == ToolKind.HTTP:
        problems = _format_errors(call.offered, call.arguments)
    if not problems:
        return None
    return call.refuse(
        "invalid_arguments",
        "The arguments don't match the tool's parameters: " + "; ".join(problems) + ". Fix them and call again,"
        " or ask the customer for what is missing.",
    )


# --- 3. identity comes from the credential, never from the model -------------------------------------------------


def verified_user(ctx: PolicyContext, call: PolicyCall) -> Decision | None:
    if not call.offered.requires_verified_user or ctx.verified:
        return None
    return call.refuse(
        "verified_user_required",
        "This tool needs a signed-in customer, and this one isn't verified. Don't ask for identifying details "
        "to work around it: tell the customer to sign in to the app, or offer to hand over to the team.",
    )


# --- 4. available now --------------------------------------------------------------------------------------------


def within_business_hours(hours: dict[str, Any] | None, now: datetime.datetime) -> bool:
    if not hours:
        return True
    local = now.astimezone(zoneinfo.ZoneInfo(hours["timezone"]))
    if local.date().isoformat() in set(hours.get("closed_dates", [])):
        return False
    weekly = hours.get("weekly")
    if not weekly:
        return True
    day = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")[local.weekday()]
    clock = local.strftime("%H:%M")
    return any(i["day"] == day and i["open"] <= clock < i["close"] for i in weekly)


def available_now(ctx: PolicyContext, call: PolicyCall) -> Decision | None:
    if call.offered.effect == Effect.ACTION and ctx.actions_paused():
        return call.refuse(
            "not_available",
            "Actions are paused for this assistant right now. Don't promise the action: tell the customer it can't "
            "be done here at the moment and offer a handover to the team.",
        )
    tool = call.offered.builtin
    if tool is None:
        return None
    if tool.sessions_only and not ctx.has_session:
        return call.refuse("not_available", "Flagging works only in a conversation session.")
    if tool.requires_searchable_knowledge and not ctx.has_searchable_knowledge():
        return call.refuse(
            "not_available",
            "There is no searchable knowledge right now. Answer from the instructions, or say you don't know.",
        )
    if tool.follows_business_hours and not within_business_hours(ctx.business_hours, ctx.now):
        return call.refuse(
            "outside_business_hours",
            "The team is outside business hours, so nobody can take the conversation now. Tell the customer when the "
            "team is available and, if tickets are offered, open one instead.",
        )
    if tool.one_open_ticket_per_customer:
        existing = ctx.open_ticket_number()
        if existing:
            return call.refuse(
                "ticket_already_open",
                f"This customer already has an open ticket, {existing}. Don't open another: give them {existing} "
                "and say the team is on it.",
            )
    return None


# --- 5. not twice ------------------------------------------------------------------------------------------------


def not_a_duplicate(ctx: PolicyContext, call: PolicyCall) -> Decision | None:
    if (call.name, arguments_hash(call.arguments)) not in ctx.succeeded:
        return None
    return call.refuse(
        "duplicate_call",
        "This exact call already succeeded in this reply; its result is above. Use that result instead of "
        "calling again.",
    )


# --- 6. not after a cancel ---------------------------------------------------------------------------------------


def not_cancelled(ctx: PolicyContext, call: PolicyCall) -> Decision | None:
    if not ctx.cancelled:
        return None
    return call.refuse("run_cancelled", "This reply was cancelled; no further tools run.")


# --- 7. per-user limits, counting every attempt ------------------------------------------------------------------


def within_per_user_limits(ctx: PolicyContext, call: PolicyCall) -> Decision | None:
    if call.offered.kind in CALLS_OUT and ctx.http_calls_last_hour() >= HTTP_CALLS_PER_HOUR:
        return call.refuse(
            "rate_limited",
            f"This customer reached the limit of {HTTP_CALLS_PER_HOUR} lookups an hour. Answer with what you "
            "already know, or offer a handover.",
        )
    tool = call.offered.builtin
    limit = tool.tickets_per_day if tool is not None else None
    if limit is not None and ctx.tickets_last_day() >= limit:
        return call.refuse(
            "rate_limited",
            f"This customer reached the limit of {limit} tickets a day. Don't open another; offer a handover instead.",
        )
    return None


# --- 8. budgets --------------------------------------------------------------------------------------------------


def within_round_budget(ctx: PolicyContext, call: PolicyCall) -> Decision | None:
    if ctx.round > ctx.max_rounds:
        return call.refuse(
            "round_budget_exhausted",
            "No tool rounds are left for this reply. Answer the customer now with what you have.",
        )
    if ctx.index_in_round >= MAX_CALLS_PER_ROUND:
        return call.refuse(
            "too_many_calls",
            f"At most {MAX_CALLS_PER_ROUND} tool calls run per round; this one did not run. Call it again in the "
            "next round if you still need it.",
        )
    return None


# The SPEC's table, row by row: the first step that refuses answers the model. A new check is a new step here.
POLICY_STEPS: Final[tuple[PolicyStep, ...]] = (
    in_the_tool_set,
    arguments_valid,
    verified_user,
    available_now,
    not_a_duplicate,
    not_cancelled,
    within_per_user_limits,
    within_round_budget,
)


def policy_check(ctx: PolicyContext, requested_name: str, raw_arguments: str) -> Decision:
    """The decision on one tool call: the name through aliases, the arguments parsed and through synonyms, then
    `POLICY_STEPS` in order. The first refusal, or the allowance with the tool's spec."""
    name = builtins.resolve_alias(requested_name, [spec.name for spec in ctx.tool_set]) or ""
    spec = next((s for s in ctx.tool_set if s.name == name), None)
    sent, parse_problem = parse_arguments(raw_arguments)
    call = PolicyCall(requested_name, name, spec, sent, parse_problem, _normalized(spec, sent))
    for step in POLICY_STEPS:
        refusal = step(ctx, call)
        if refusal is not None:
            return refusal
    return Decision(True, name, call.arguments, arguments_hash(call.arguments), spec=spec)
