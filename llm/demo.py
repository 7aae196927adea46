"""`demo`: a small deterministic offline model for the embedded default and demos (`bin/run`, the chat widget). It
hands the conversation to the team when the customer asks for a person (in English or Arabic), else picks a tool by
word overlap with the tools' names and descriptions, fills arguments from the schema, and says it is a demo.

It answers a tool result as a person would, in the customer's language: plain sentences of what the result says,
never its JSON, K-Agent's ids or the notes a result carries for the model ("Tell the customer…"); a failure as a
plain apology, without its code. What it says is what the truthfulness guard (guard/) verifies: a handoff
only after the handoff built-in made one, a ticket's number only as the ticket's receipt gives it, every failure
with an admission; an answer the guard pushes back anyway is followed by a plain "I can't confirm that".

Here: the tool it calls and its arguments, and the model's turn; how it reads the customer's words (and whether they
ask for a person) is in llm/demo_words.py, what it says in words in llm/demo_replies.py."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from typing import Any

import regex

from llm.demo_replies import demo_text
from llm.demo_words import WORD_RE, content_words, demo_asks_for_a_person
from llm.types import ModelRequest, ModelResponse, ToolCallRequest, ToolDefinition, Usage
from tools.arabic import normalize_arabic, normalize_digits
from tools.builtin_defs import TRANSFER_TO_HUMAN

DEMO_PREFIX = "(Demo model)"
DEMO_MODEL_NAME = "demo"
DEMO_THRESHOLD = 2  # a word in a tool's name counts 2, in its description 1: one name word or two description words
_NAME_WEIGHT = 2
# The user's words are anyone's: every expression on them is linear or runs with a time limit.
# linear: a start is a digit or "-", the digits are taken greedily and the optional fraction can't overlap them.
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")
# linear: one character class, repeated.
_TOKEN_SPLIT_RE = re.compile(r"[\s,;:!?()\"']+")
_EMAIL_STOPS = frozenset("@<>()\"'")
_ID_HINTS = ("number", "id", "code", "reference", "ref", "tracking", "رقم")


def _tool_score(user_words: set[str], tool: ToolDefinition) -> int:
    name_words = set(content_words(tool.name.replace("_", " ")))
    description_words = set(content_words(tool.description))
    return sum(_NAME_WEIGHT if word in name_words else 1 if word in description_words else 0 for word in user_words)


def demo_pick_tool(user_text: str, tools: Sequence[ToolDefinition]) -> ToolDefinition | None:
    """The tool whose name and description share the most words with `user_text`, if it reaches the threshold."""
    user_words = set(content_words(user_text))
    best: tuple[int, str] | None = None
    chosen: ToolDefinition | None = None
    for tool in tools:
        score = _tool_score(user_words, tool)
        # Ties go to the alphabetically first name, so the choice never depends on the order tools were given in.
        if score >= DEMO_THRESHOLD and (best is None or (-score, tool.name) < best):
            best, chosen = (-score, tool.name), tool
    return chosen


def _handoff_tool(user_text: str, tools: Sequence[ToolDefinition]) -> ToolDefinition | None:
    """The handoff built-in when the customer asks for a person and the agent has it: before any other tool (a
    starter rule: "When the customer asks for a person, hand over straight away")."""
    tool = next((t for t in tools if t.name == TRANSFER_TO_HUMAN.name), None)
    return tool if tool is not None and demo_asks_for_a_person(user_text) else None


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
    hint_words = WORD_RE.findall(f"{name} {schema.get('description', '')}".lower().replace("_", " "))
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
        words = set(content_words(str(value).replace("_", " ")))
        if words and words <= user_words:
            return value, True
    return (values[0] if values else None), False


def demo_arguments(tool: ToolDefinition, user_text: str) -> dict[str, Any]:
    """Arguments for `tool` from the user's words, by its JSON Schema; optional ones only when clearly given."""
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    required = set(tool.parameters.get("required") or []) if isinstance(tool.parameters, dict) else set()
    user_words = set(content_words(user_text))
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


def _word_pieces(text: str) -> list[str]:
    """`text` in word-sized pieces, each word with the space after it: joined, exactly `text`."""
    words = text.split(" ")
    return [word + " " for word in words[:-1]] + [words[-1]]


def _word_count(text: str) -> int:
    return len(text.split())


def demo_complete(request: ModelRequest) -> ModelResponse:
    """The offline demo model: deterministic, at most one tool call per user turn, and honest about being a demo.
    Its text reaches the request's sink word by word, as a streamed answer does, with no wait between the words."""
    last_user = max((i for i, m in enumerate(request.messages) if m.role == "user"), default=-1)
    input_tokens = _word_count(request.system) + sum(_word_count(m.content) for m in request.messages)
    # At most one tool per user turn: once this turn has called a tool, the next answer is the summary. An answer
    # pushed back by the truthfulness guard is followed by its notice: no tool either, the next answer is plain.
    already_called = any(
        (m.role == "assistant" and m.tool_calls) or m.role == "notice" for m in request.messages[last_user + 1 :]
    )
    if last_user >= 0 and request.tools and request.tool_choice == "auto" and not already_called:
        user_text = request.messages[last_user].content
        tool = _handoff_tool(user_text, request.tools) or demo_pick_tool(user_text, request.tools)
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
    text = f"{DEMO_PREFIX} {demo_text(request, last_user)}"
    if request.sink is not None:
        for piece in _word_pieces(text):
            request.sink.text(piece)
    return ModelResponse(
        text=text, usage=Usage(input_tokens=input_tokens, output_tokens=_word_count(text)), model_name=DEMO_MODEL_NAME
    )
