"""`demo`: a small deterministic offline model for the embedded default and demos. It picks a tool by word overlap
with the tools' names and descriptions, fills arguments from the schema, says it is a demo, and never claims what a
tool result didn't confirm."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

import regex

from runs.llm import Message, ModelRequest, ModelResponse, ToolCallRequest, ToolDefinition, Usage
from runs.providers.transport import json_object
from tools.arabic import normalize_arabic, normalize_digits

DEMO_PREFIX = "(Demo model)"
DEMO_MODEL_NAME = "demo"
DEMO_THRESHOLD = 2  # a word in a tool's name counts 2, in its description 1: one name word or two description words
_NAME_WEIGHT = 2
# The user's words are anyone's: every expression on them is linear or runs with a time limit.
# linear: one character class, repeated; a failed start costs one character.
_WORD_RE = re.compile(r"\w+", re.UNICODE)
# linear: a start is a digit or "-", the digits are taken greedily and the optional fraction can't overlap them.
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")
# linear: one character class, repeated.
_TOKEN_SPLIT_RE = re.compile(r"[\s,;:!?()\"']+")
_EMAIL_STOPS = frozenset("@<>()\"'")
_ID_HINTS = ("number", "id", "code", "reference", "ref", "tracking", "رقم")

_STOPWORDS_RAW = """
a an the and or but if of to in on at by for from with about into over under as is are was were be been being am
i me my mine we us our you your yours he she it its they them their this that these those there here what which who
whom whose when where why how can could would should will shall may might must do does did done have has had having
not no yes please pls thanks thank hi hello hey ok okay so just also too very really some any all get got want wanted
need needs like know tell let help
في من الى إلى على عن ان أن إن انا أنا انت أنت هو هي نحن هم هل ما ماذا لماذا كيف متى اين أين هذا هذه ذلك تلك و او أو
يا لو مع لي لك عند كان كانت ممكن ابي أبي اريد أريد بدي شكرا مرحبا السلام عليكم لا نعم
"""
_STOPWORDS = frozenset(normalize_arabic(w) for w in _STOPWORDS_RAW.split())


def _stem(word: str) -> str:
    """A very light stem, applied to both sides alike: damaged ~ damage, orders ~ order, الطلب ~ طلب."""
    if word.startswith("ال") and len(word) > 4:
        return word[2:]
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def _words(text: str) -> list[str]:
    """Content words of `text`: Arabic-folded, split, stopwords and 1-letter tokens dropped, lightly stemmed."""
    out: list[str] = []
    for token in _WORD_RE.findall(normalize_arabic(text).replace("_", " ")):
        if len(token) < 2 or token in _STOPWORDS or token.isdigit():
            continue
        out.append(_stem(token))
    return out


def _tool_score(user_words: set[str], tool: ToolDefinition) -> int:
    name_words = set(_words(tool.name.replace("_", " ")))
    description_words = set(_words(tool.description))
    return sum(_NAME_WEIGHT if word in name_words else 1 if word in description_words else 0 for word in user_words)


def demo_pick_tool(user_text: str, tools: Sequence[ToolDefinition]) -> ToolDefinition | None:
    """The tool whose name and description share the most words with `user_text`, if it reaches the threshold."""
    user_words = set(_words(user_text))
    best: tuple[int, str] | None = None
    chosen: ToolDefinition | None = None
    for tool in tools:
        score = _tool_score(user_words, tool)
        # Ties go to the alphabetically first name, so the choice never depends on the order tools were given in.
        if score >= DEMO_THRESHOLD and (best is None or (-score, tool.name) < best):
            best, chosen = (-score, tool.name), tool
    return chosen


def _numbers(text: str) -> list[str]:
    return _NUMBER_RE.findall(normalize_arabic(text))


def _find_email(text: str) -> str | None:
    """The first `local@domain.tld` in `text`, as `[^\\s@<>()"']+@[^\\s@<>()"']+\\.[a-zA-Z]{2,}` would find it, in one
    pass (that expression backtracks quadratically on a long run without an @: 3 s on 20 kB). linear: each character
    is read once looking left of an @ and once looking right of it, and those stretches don't overlap."""

    def local(char: str) -> bool:
        return not char.isspace() and char not in _EMAIL_STOPS

    at = text.find("@")
    while at != -1:
        start = at
        while start > 0 and local(text[start - 1]):
            start -= 1
        end = at + 1
        while end < len(text) and local(text[end]):
            end += 1
        domain = text[at + 1 : end]
        # The last "." with at least one character before it and two or more ASCII letters after it.
        dot = domain.rfind(".")
        while start < at and dot > 0:
            letters = 0
            while dot + 1 + letters < len(domain) and domain[dot + 1 + letters] in _ASCII_LETTERS:
                letters += 1
            if letters >= 2:
                return text[start : at + 1 + dot + 1 + letters]
            dot = domain.rfind(".", 0, dot)
        at = text.find("@", at + 1)
    return None


_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

# A tenant's schema pattern is run against the end user's words: on the regex module with a time limit shared by all
# the tokens of one message (Python's re has none). A pattern that doesn't answer in time, or doesn't compile, is not
# used: the id-like token fallback still applies.
_MAX_PATTERN_TOKENS = 50
_MAX_PATTERN_TOKEN_LENGTH = 40
PATTERN_BUDGET_S = 0.2


def _pattern_token(pattern: Any, tokens: list[str]) -> str | None:
    """The first token the tenant's `pattern` matches in full, within the budget."""
    if not isinstance(pattern, str) or len(pattern) > 200:
        return None
    deadline = time.monotonic() + PATTERN_BUDGET_S
    for token in tokens[:_MAX_PATTERN_TOKENS]:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if len(token) > _MAX_PATTERN_TOKEN_LENGTH:
            continue
        try:
            if regex.fullmatch(pattern, token, timeout=left):
                return token
        except (TimeoutError, regex.error):
            return None
    return None


def _string_value(name: str, schema: dict[str, Any], text: str, *, required: bool) -> str | None:
    """A string argument from the user's words: a token matching the schema's pattern, an email for an email
    field, or (required fields only, where a guess beats nothing) an id-like token for a number/id/code field."""
    # Digits made ASCII (٨٨١٢ is 8812) but case kept, so a pattern like ^TKT-[0-9]+$ still matches.
    tokens = [t.strip(".#") for t in _TOKEN_SPLIT_RE.split(normalize_digits(text)) if t.strip(".#")]
    matched = _pattern_token(schema.get("pattern"), tokens)
    if matched is not None:
        return matched
    hint_words = _WORD_RE.findall(f"{name} {schema.get('description', '')}".lower().replace("_", " "))
    if schema.get("format") == "email" or "email" in hint_words:
        email = _find_email(text)
        if email is not None:
            return email
    if required and any(h in hint_words for h in _ID_HINTS):
        for token in tokens:
            if any(ch.isdigit() for ch in token):
                return token
    return None


def _enum_value(schema: dict[str, Any], user_words: set[str]) -> tuple[Any, bool]:
    """(the enum value whose words appear in the message, True), else (the first value, False)."""
    values = schema.get("enum") or []
    for value in values:
        words = set(_words(str(value).replace("_", " ")))
        if words and words <= user_words:
            return value, True
    return (values[0] if values else None), False


def demo_arguments(tool: ToolDefinition, user_text: str) -> dict[str, Any]:
    """Arguments for `tool` from the user's words, by its JSON Schema; optional ones only when clearly given."""
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    required = set(tool.parameters.get("required") or []) if isinstance(tool.parameters, dict) else set()
    user_words = set(_words(user_text))
    numbers = _numbers(user_text)
    message = " ".join(user_text.split())
    args: dict[str, Any] = {}
    for name, schema in sorted((properties or {}).items()):
        if not isinstance(schema, dict):
            continue
        is_required = name in required
        kind = schema.get("type")
        if "enum" in schema:
            value, matched = _enum_value(schema, user_words)
            if matched or is_required:
                args[name] = value
        elif kind == "string":
            found = _string_value(name, schema, user_text, required=is_required)
            if found is not None:
                args[name] = found
            elif is_required:
                limit = schema.get("maxLength")
                args[name] = message[:limit] if isinstance(limit, int) else message
        elif kind in ("integer", "number"):
            if numbers:
                number = float(numbers[0])
                args[name] = int(number) if kind == "integer" else number
            elif is_required:
                args[name] = schema.get("minimum", 1)
        elif is_required:
            args[name] = {"boolean": False, "array": [], "object": {}}.get(str(kind), "")
    return args


def _flatten(value: Any, path: tuple[str, ...] = ()) -> Iterable[tuple[str, Any]]:
    """(label, scalar) pairs of a result, a few list items at most; `data`/`result` wrappers add no words."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if not path and key in ("ok", "simulated"):
                continue  # said separately
            yield from _flatten(inner, (*path, str(key)))
    elif isinstance(value, list):
        for index, inner in enumerate(value[:3]):
            yield from _flatten(inner, (*path, str(index + 1)) if len(value) > 1 else path)
    else:
        label = " ".join(p for p in path if p not in ("data", "result")).replace("_", " ")
        yield label, ("yes" if value else "no") if isinstance(value, bool) else value


def _describe_result(message: Message) -> str:
    """One sentence about one tool result, saying only what the result says."""
    tool = message.name or "the tool"
    try:
        result = json.loads(message.content)
    except ValueError:
        return f"The {tool} tool answered: {message.content[:200]}"
    if isinstance(result, dict) and result.get("ok") is False:
        error = json_object(result.get("error"))
        code = error.get("code") or "error"
        guidance = error.get("guidance") or error.get("message") or ""
        return f"The {tool} tool did not work ({code}), so I can't confirm it was done. {guidance}".strip()
    facts = [
        f"{key}: {value}" if key else str(value) for key, value in _flatten(result) if value is not None and value != ""
    ][:8]
    simulated = isinstance(result, dict) and result.get("simulated") is True
    head = f"The {tool} tool answered" + (" (simulated: nothing was sent)" if simulated else "")
    return f"{head}: {'; '.join(facts)}." if facts else f"{head} with no details."


def _demo_text(request: ModelRequest, last_user: int) -> str:
    results = [m for m in request.messages[last_user + 1 :] if m.role == "tool"]
    if results:
        return " ".join([DEMO_PREFIX, *(_describe_result(m) for m in results)])
    user_text = request.messages[last_user].content if last_user >= 0 else ""
    if not request.tools:
        return f'{DEMO_PREFIX} I am a demo model with no tools here, so I can only echo you: "{user_text[:200]}".'
    names = ", ".join(t.name for t in request.tools)
    return (
        f"{DEMO_PREFIX} I am a demo model: I match your words against this agent's tools, and none fits what you "
        f"wrote. Tools I can use: {names}."
    )


def _word_count(text: str) -> int:
    return len(text.split())


def demo_complete(request: ModelRequest) -> ModelResponse:
    """The offline demo model: deterministic, at most one tool call per user turn, and honest about being a demo."""
    last_user = max((i for i, m in enumerate(request.messages) if m.role == "user"), default=-1)
    input_tokens = _word_count(request.system) + sum(_word_count(m.content) for m in request.messages)
    # At most one tool per user turn: once this turn has called a tool, the next answer is the summary.
    already_called = any(m.role == "assistant" and m.tool_calls for m in request.messages[last_user + 1 :])
    if last_user >= 0 and request.tools and request.tool_choice == "auto" and not already_called:
        user_text = request.messages[last_user].content
        tool = demo_pick_tool(user_text, request.tools)
        if tool is not None:
            arguments = json.dumps(demo_arguments(tool, user_text), sort_keys=True, ensure_ascii=False)
            turn = sum(1 for m in request.messages if m.role == "assistant")
            digest = hashlib.sha256(f"{turn}|{tool.name}|{arguments}".encode()).hexdigest()[:12]
            return ModelResponse(
                text="",
                tool_calls=(ToolCallRequest(id=f"call_demo_{turn}_{digest}", name=tool.name, arguments=arguments),),
                usage=Usage(input_tokens=input_tokens, output_tokens=_word_count(arguments)),
                model_name=DEMO_MODEL_NAME,
            )
    text = _demo_text(request, last_user)
    return ModelResponse(
        text=text, usage=Usage(input_tokens=input_tokens, output_tokens=_word_count(text)), model_name=DEMO_MODEL_NAME
    )
