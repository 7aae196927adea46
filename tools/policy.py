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

Tool names the model invents are resolved through aliases before step 1, argument names through synonyms before
step 2 (a real key always wins). This module decides; it never runs a tool and never writes.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tools import builtins
from tools.arguments import StrictValidator
from tools.templating import TEXT_MAX, is_token
from tools.templating import normalize_arguments as normalize_digits_in
from tools.toolset import ToolKind, ToolSpec

HTTP_CALLS_PER_HOUR = 20
TICKETS_PER_DAY = 5
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


def arguments_hash(arguments: Any) -> str:
    return hashlib.sha256(json.dumps(arguments, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def parse_arguments(raw: str) -> tuple[Any, str | None]:
    """The model's JSON arguments, or an explanation of why they aren't JSON. Empty means {}."""
    if raw is None or not str(raw).strip():
        return {}, None
    try:
        return json.loads(raw), None
    except (ValueError, TypeError) as exc:
        return None, f"The arguments are not valid JSON ({exc.__class__.__name__}). Send a JSON object."


def _refuse(code: str, guidance: str, name: str, arguments: Any, spec: ToolSpec | None = None) -> Decision:
    return Decision(False, name, arguments, arguments_hash(arguments), code, guidance, spec)


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
    validator = StrictValidator(schema)
    problems = []
    try:
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(map(str, e.absolute_path)))
    except Exception:  # a tenant schema that can't be evaluated (e.g. a $ref to nowhere) runs nothing
        return ["the tool's parameter schema can't be checked; this tool can't be used right now"]
    for error in errors:
        where = ".".join(map(str, error.absolute_path)) or "arguments"
        message = error.message if len(error.message) < 160 else error.message[:159] + "…"
        problems.append(f"{where}: {message}")
    return problems[:5]


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


def policy_check(ctx: PolicyContext, requested_name: str, raw_arguments: str) -> Decision:
    available = [spec.name for spec in ctx.tool_set]
    name = builtins.resolve_alias(requested_name, available) or ""
    arguments, parse_problem = parse_arguments(raw_arguments)

    # 1. In the run's tool set, with tools switched on.
    spec = next((s for s in ctx.tool_set if s.name == name), None)
    if not ctx.tools_enabled or spec is None:
        offered = ", ".join(available) if available and ctx.tools_enabled else "none"
        return _refuse(
            "tool_not_available",
            f"There is no tool named {requested_name[:64]!r} in this conversation (tools offered: {offered}). "
            "Answer without it, or use one of the offered tools.",
            name,
            arguments,
        )

    # 2. Strict validation (after synonyms; a real key wins).
    if parse_problem:
        return _refuse("invalid_arguments", parse_problem, name, arguments, spec)
    if spec.kind == ToolKind.BUILTIN and isinstance(arguments, dict):
        tool = builtins.get(name)
        assert tool is not None
        arguments = builtins.normalize_arguments(tool, arguments)
    if spec.kind == ToolKind.HTTP and isinstance(arguments, dict):
        # Seed: Arabic-Indic digits are converted to ASCII before checks (٨٨١٢ and 8812 are the same order number).
        arguments = normalize_digits_in(arguments)
    problems = _schema_problems(spec, arguments)
    if not problems and spec.kind == ToolKind.HTTP:
        problems = _format_errors(spec, arguments)
    if problems:
        return _refuse(
            "invalid_arguments",
            "The arguments don't match the tool's parameters: " + "; ".join(problems) + ". Fix them and call again,"
            " or ask the customer for what is missing.",
            name,
            arguments,
            spec,
        )

    # 3. Identity comes from the credential, never from the model.
    if spec.requires_verified_user and not ctx.verified:
        return _refuse(
            "verified_user_required",
            "This tool needs a signed-in customer, and this one isn't verified. Don't ask for identifying details "
            "to work around it: tell the customer to sign in to the app, or offer to hand over to the team.",
            name,
            arguments,
            spec,
        )

    # 4. Available now.
    if spec.effect == "action" and ctx.actions_paused():
        return _refuse(
            "not_available",
            "Actions are paused for this assistant right now. Don't promise the action: tell the customer it can't "
            "be done here at the moment and offer a handover to the team.",
            name,
            arguments,
            spec,
        )
    if name == "flag_conversation" and not ctx.has_session:
        return _refuse("not_available", "Flagging works only in a conversation session.", name, arguments, spec)
    if name == "search_knowledge" and not ctx.has_searchable_knowledge():
        return _refuse(
            "not_available",
            "There is no searchable knowledge right now. Answer from the instructions, or say you don't know.",
            name,
            arguments,
            spec,
        )
    if name == "transfer_to_human" and not within_business_hours(ctx.business_hours, ctx.now):
        return _refuse(
            "outside_business_hours",
            "The team is outside business hours, so nobody can take the conversation now. Tell the customer when the "
            "team is available and, if tickets are offered, open one instead.",
            name,
            arguments,
            spec,
        )
    if name == "create_ticket":
        existing = ctx.open_ticket_number()
        if existing:
            return _refuse(
                "ticket_already_open",
                f"This customer already has an open ticket, {existing}. Don't open another: give them {existing} "
                "and say the team is on it.",
                name,
                arguments,
                spec,
            )

    # 5. Not twice.
    digest = arguments_hash(arguments)
    if (name, digest) in ctx.succeeded:
        return _refuse(
            "duplicate_call",
            "This exact call already succeeded in this reply; its result is above. Use that result instead of "
            "calling again.",
            name,
            arguments,
            spec,
        )

    # 6. Not after a cancel.
    if ctx.cancelled:
        return _refuse("run_cancelled", "This reply was cancelled; no further tools run.", name, arguments, spec)

    # 7. Per-user limits, counting every attempt.
    if spec.kind == ToolKind.HTTP and ctx.http_calls_last_hour() >= HTTP_CALLS_PER_HOUR:
        return _refuse(
            "rate_limited",
            f"This customer reached the limit of {HTTP_CALLS_PER_HOUR} lookups an hour. Answer with what you "
            "already know, or offer a handover.",
            name,
            arguments,
            spec,
        )
    if name == "create_ticket" and ctx.tickets_last_day() >= TICKETS_PER_DAY:
        return _refuse(
            "rate_limited",
            f"This customer reached the limit of {TICKETS_PER_DAY} tickets a day. Don't open another; offer a "
            "handover instead.",
            name,
            arguments,
            spec,
        )

    # 8. Budgets.
    if ctx.round > ctx.max_rounds:
        return _refuse(
            "round_budget_exhausted",
            "No tool rounds are left for this reply. Answer the customer now with what you have.",
            name,
            arguments,
            spec,
        )
    if ctx.index_in_round >= MAX_CALLS_PER_ROUND:
        return _refuse(
            "too_many_calls",
            f"At most {MAX_CALLS_PER_ROUND} tool calls run per round; this one did not run. Call it again in the "
            "next round if you still need it.",
            name,
            arguments,
            spec,
        )
    return Decision(True, name, arguments, digest, spec=spec)
