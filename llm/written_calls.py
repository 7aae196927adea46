"""Tool calls written as text (SPEC §5, seed "Fenced tools"): recovered from a model's answer, never shown.

A model without a native tool channel writes its calls into its text, in one of two forms:

    <tool_call>{"name": "order_status", "arguments": {"order_number": "8812"}}</tool_call>

    <invoke name="order_status">
    <parameter name="order_number">8812</parameter>
    </invoke>

"One matched block does it": `recover_written_calls` returns the text with every block removed and the blocks as
`ToolCallRequest`s, which the engine then treats as the model's tool calls (the same policy check, the same
records). `WrittenCallFilter` is the same reading done as the text arrives, for streaming: it releases only text
that can't be part of a block, and what it releases, joined, is exactly the text `recover_written_calls` returns.

The contract, for a model's text, which is hostile input:
- A block starts at `<tool_call` or `<invoke` followed by a space, `>` or `/`, and ends at the first `</tool_call>`
  or `</invoke>` after its opening tag (`<invoke …/>` ends at its tag). A block never closed runs to the end of the
  text. Lone tags (`</tool_call>`, `</invoke>`, `<function_calls>`, `</function_calls>`) are removed too, and text
  that ends on what could be the start of one of these tags is left out: a block is never shown, even in part.
- A block that can't be read is still a call, so the model hears about it through the policy check: with the tool
  name it wrote if one can be read (its arguments, not JSON, fail `invalid_arguments`), else under
  `UNREADABLE_CALL_NAME` (no such tool: `tool_not_available`, whose guidance lists the tools offered). Either way it
  is refused before anything runs.
- At most `MAX_WRITTEN_CALLS` calls per answer, twice what a round runs: the ones past 5 are refused
  `too_many_calls` by the policy as native calls are, so the model hears that they didn't run. Blocks past that are
  removed and dropped. A block's content over `MAX_BLOCK_CHARS` is not read (unreadable).
- Every scan is linear: `str.find`/`startswith` and expressions reviewed as linear; no block is read twice.
- The text on either side of a removed block is joined as it is and not read again: calls are read once, from what
  the model wrote (text woven around a block to spell a tag stays text, and runs nothing).

Call ids are derived from the run, the round and the call's place in the answer: a run resumed after a crash asks
the model again and gets the same ids for the same answer.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from llm.types import ToolCallRequest
from tools import builtins
from tools.policy import MAX_CALLS_PER_ROUND
from tools.toolset import ToolSpec

MAX_WRITTEN_CALLS: Final = 2 * MAX_CALLS_PER_ROUND
MAX_BLOCK_CHARS: Final = 64 * 1024
MAX_NAME_CHARS: Final = 64  # what providers accept as a function name in the transcript sent back
# The name of a call whose block names no tool that can be read: fits every provider's name rules, and its
# arguments never parse as a JSON object, so the policy refuses it whatever the tool set holds.
UNREADABLE_CALL_NAME: Final = "unreadable_tool_call"
UNREADABLE_ARGUMENTS: Final = "(unreadable)"

_TOOL_CALL, _INVOKE = "<tool_call", "<invoke"
_OPENERS: Final = (_TOOL_CALL, _INVOKE)
_CLOSERS: Final = {_TOOL_CALL: "</tool_call>", _INVOKE: "</invoke>"}
_LONE_TAGS: Final = ("</tool_call>", "</invoke>", "<function_calls>", "</function_calls>")
_AFTER_OPENER: Final = frozenset(" \t\r\n>/")  # "<invoked" is a word, "<invoke " a block
_LONGEST_TAG: Final = max(len(tag) for tag in _OPENERS + _LONE_TAGS)
_PARAMETER, _PARAMETER_END = "<parameter", "</parameter>"

# linear: a literal, two runs of one class around a literal, then a bounded run of a class the quote ends
_NAME_ATTRIBUTE_RE = re.compile(r"""\bname\s*=\s*(?:"([^"]{0,200})"|'([^']{0,200})')""")
# linear: a literal, two runs of one class around a literal, then a bounded run of a class the quote ends
_JSON_NAME_RE = re.compile(r'"name"\s*:\s*"([^"\\]{1,200})"')
# linear: one class, repeated
_NOT_NAME_RE = re.compile(r"[^A-Za-z0-9_-]+")


# --- finding blocks -----------------------------------------------------------------------------------------------

_TEXT, _OPENING_TAG, _CONTENT = 0, 1, 2


class _Scanner:
    """Finds blocks in text fed in pieces, remembering only what is undecided: the start of a possible tag, the last
    character of an opening tag, or the tail of a block that might be the start of its closing tag. Offsets are into
    everything fed so far. `blocks` holds (start, end, opener) of every call block found."""

    def __init__(self) -> None:
        self.held = ""  # undecided text, never released yet
        self.held_at = 0  # the offset of held[0]
        self.mode = _TEXT
        self.opener = ""  # the block being read
        self.block_start = 0
        self.blocks: list[tuple[int, int, str]] = []

    def feed(self, chunk: str) -> str:
        """The text of `chunk` (with what was held before it) that is decided to be shown."""
        s, base = self.held + chunk, self.held_at
        shown: list[str] = []
        i = 0
        while i < len(s):
            if self.mode == _TEXT:
                j = s.find("<", i)
                if j < 0:
                    shown.append(s[i:])
                    i = len(s)
                    break
                shown.append(s[i:j])
                lone = next((tag for tag in _LONE_TAGS if s.startswith(tag, j)), None)
                if lone is not None:
                    i = j + len(lone)
                    continue
                opener = next((tag for tag in _OPENERS if s.startswith(tag, j)), None)
                if opener is not None and j + len(opener) < len(s):
                    if s[j + len(opener)] in _AFTER_OPENER:
                        self.mode, self.opener, self.block_start = _OPENING_TAG, opener, base + j
                        i = j + len(opener)
                        continue
                elif _could_be_a_tag(s, j):
                    i = j
                    break  # undecided until more text comes
                shown.append("<")
                i = j + 1
            elif self.mode == _OPENING_TAG:
                end = s.find(">", i)
                if end < 0:
                    i = max(i, len(s) - 1)  # keep one character: "/" then ">" closes the block at its tag
                    break
                if s[end - 1] == "/":
                    self._block_ends(base + end + 1)
                else:
                    self.mode = _CONTENT
                i = end + 1
            else:
                closer = _CLOSERS[self.opener]
                end = s.find(closer, i)
                if end < 0:
                    i = max(i, len(s) - (len(closer) - 1))  # a closing tag may be arriving in pieces
                    break
                self._block_ends(base + end + len(closer))
                i = end + len(closer)
        self.held, self.held_at = s[i:], base + i
        return "".join(shown)

    def finish(self) -> None:
        """The text ended: a block still open runs to its end; a possible tag's start is left out."""
        if self.mode != _TEXT:
            self._block_ends(self.held_at + len(self.held))
        self.held_at += len(self.held)
        self.held = ""

    def _block_ends(self, end: int) -> None:
        self.blocks.append((self.block_start, end, self.opener))
        self.mode, self.opener = _TEXT, ""


def _could_be_a_tag(s: str, j: int) -> bool:
    """The text from `j` to the end is short and the start of a tag this module removes."""
    rest = s[j : j + _LONGEST_TAG]
    return len(rest) == len(s) - j and any(tag.startswith(rest) for tag in _OPENERS + _LONE_TAGS)


class WrittenCallFilter:
    """The text of a model's answer as it arrives, without the tool calls written in it.

        stream = WrittenCallFilter()
        for chunk in chunks:
            send(stream.feed(chunk))   # never any part of a block
        send(stream.close())

    Joined, what it releases is `recover_written_calls(whole_text).text`. It holds back from a `<` that might
    start a block until it knows, and keeps only a few characters of a block it is reading."""

    def __init__(self) -> None:
        self._scanner = _Scanner()
        self._closed = False

    def feed(self, chunk: str) -> str:
        if self._closed:
            raise ValueError("the filter is closed")
        return self._scanner.feed(chunk)

    def close(self) -> str:
        """The text ended: what is still held is never shown (a block, or what might have started one)."""
        self._scanner.finish()
        self._closed = True
        return ""

    @property
    def blocks(self) -> int:
        """The blocks found so far (one being read counts once it ends, or at `close`)."""
        return len(self._scanner.blocks)


# --- reading blocks -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WrittenCalls:
    text: str  # the answer with every block and lone tag removed
    calls: tuple[ToolCallRequest, ...]  # at most MAX_WRITTEN_CALLS, in the order written
    blocks: int  # call blocks found (the ones past MAX_WRITTEN_CALLS included)

    @property
    def found(self) -> bool:
        return self.blocks > 0


def written_call_id(run_id: str, round_number: int, index: int) -> str:
    """A written call's id: the same run, round and place give the same id (a resumed run asks the model again)."""
    digest = hashlib.sha256(f"{run_id}|{round_number}|{index}".encode()).hexdigest()[:16]
    return f"call_text_{digest}"


def recover_written_calls(text: str, *, run_id: str, round_number: int, tools: Sequence[ToolSpec] = ()) -> WrittenCalls:
    """`text` without its blocks, and the calls written in them. `tools` (the run's tool set) says which parameter
    values of an `<invoke>` block are strings: a string parameter keeps "8812" as the text it is."""
    scanner = _Scanner()
    shown = scanner.feed(text)
    scanner.finish()
    if not scanner.blocks:
        return WrittenCalls(text=shown, calls=(), blocks=0)
    calls = []
    for index, (start, end, opener) in enumerate(scanner.blocks[:MAX_WRITTEN_CALLS]):
        name, arguments = _read_block(text[start:end], opener, tools)
        calls.append(ToolCallRequest(written_call_id(run_id, round_number, index), name, arguments))
    return WrittenCalls(text=shown, calls=tuple(calls), blocks=len(scanner.blocks))


def _read_block(block: str, opener: str, tools: Sequence[ToolSpec]) -> tuple[str, str]:
    """(name, arguments as JSON text) of one block; an unreadable one's arguments never parse as a JSON object."""
    end_of_tag = block.find(">")
    if end_of_tag < 0:  # the text ended inside the opening tag
        tag, content = block, ""
    else:
        tag, content = block[: end_of_tag + 1], block[end_of_tag + 1 :]
        if tag.endswith("/>"):
            content = ""
        elif content.endswith(_CLOSERS[opener]):
            content = content[: -len(_CLOSERS[opener])]
    name, arguments = _read_tool_call(content) if opener == _TOOL_CALL else _read_invoke(tag, content, tools)
    if name == UNREADABLE_CALL_NAME:
        arguments = _not_an_object(arguments)  # no tool may run for it, whatever the tool set holds
    return name, arguments


def _read_tool_call(content: str) -> tuple[str, str]:
    """`{"name": …, "arguments": {…} or "…"}` (a model that says "parameters" means the arguments)."""
    if len(content) > MAX_BLOCK_CHARS:
        found = _JSON_NAME_RE.search(content, 0, 1000)
        return _tool_name(found.group(1) if found else ""), UNREADABLE_ARGUMENTS
    data, readable = _json(content.strip())
    if not readable:
        found = _JSON_NAME_RE.search(content)
        return _tool_name(found.group(1) if found else ""), _not_an_object(content)
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(name, str):
        return UNREADABLE_CALL_NAME, _not_an_object(content)
    arguments = data["arguments"] if "arguments" in data else data.get("parameters")
    if arguments is None:
        return _tool_name(name), "{}"
    if isinstance(arguments, str):
        return _tool_name(name), arguments  # JSON text as the native channel sends it; the policy reads it
    return _tool_name(name), json.dumps(arguments, ensure_ascii=False)


def _read_invoke(tag: str, content: str, tools: Sequence[ToolSpec]) -> tuple[str, str]:
    """`<invoke name="x"><parameter name="a">value</parameter>…</invoke>`; text between parameters is ignored."""
    name = _tool_name(_attribute(tag) or "")
    if len(content) > MAX_BLOCK_CHARS:
        return name, UNREADABLE_ARGUMENTS
    values: dict[str, str] = {}
    at = 0
    while (start := content.find(_PARAMETER, at)) >= 0:
        end_of_tag = content.find(">", start)
        after = content[start + len(_PARAMETER) : start + len(_PARAMETER) + 1]
        parameter = _attribute(content[start : end_of_tag + 1]) if end_of_tag >= 0 and after in _AFTER_OPENER else None
        if parameter is None or parameter in values:
            # A parameter that can't be read, or written twice: running the call without it, or with a guess, could
            # do what the model didn't ask. Its arguments are refused as a whole.
            return name, _not_an_object(content)
        if content[end_of_tag - 1] == "/":
            values[parameter], at = "", end_of_tag + 1
            continue
        end = content.find(_PARAMETER_END, end_of_tag + 1)
        if end < 0:
            return name, _not_an_object(content)
        values[parameter], at = content[end_of_tag + 1 : end], end + len(_PARAMETER_END)
    spec = _spec(name, tools)
    arguments = {key: _typed(spec, key, value.strip()) for key, value in values.items()}
    return name, json.dumps(arguments, ensure_ascii=False)


def _typed(spec: ToolSpec | None, parameter: str, value: str) -> Any:
    """A parameter's value as the tool expects it: JSON when it reads as JSON, else the text; a string parameter
    keeps its text ("8812", "true" and "null" stay strings; a JSON string literal is read as the string it is)."""
    types = _types(spec, parameter, value)
    if "string" in types:
        if value.startswith('"'):
            decoded, readable = _json(value)
            if readable and isinstance(decoded, str):
                return decoded
        return value
    decoded, readable = _json(value)
    return decoded if readable else value


def _types(spec: ToolSpec | None, parameter: str, value: str) -> set[str]:
    """The JSON Schema types the tool declares for `parameter` (through a built-in's argument synonyms, as the
    policy check will map it); empty when unknown."""
    if spec is None:
        return set()
    properties = spec.parameters.get("properties")
    if not isinstance(properties, dict):
        return set()
    if parameter not in properties and spec.builtin is not None:
        parameter = next(iter(builtins.normalize_arguments(spec.builtin, {parameter: value})), parameter)
    schema = properties.get(parameter)
    declared = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(declared, str):
        return {declared}
    return {t for t in declared if isinstance(t, str)} if isinstance(declared, list) else set()


def _spec(name: str, tools: Sequence[ToolSpec]) -> ToolSpec | None:
    resolved = builtins.resolve_alias(name, [spec.name for spec in tools])
    return next((spec for spec in tools if spec.name == resolved), None)


def _attribute(tag: str) -> str | None:
    """The `name` attribute of a tag (double or single quotes), or None."""
    found = _NAME_ATTRIBUTE_RE.search(tag)
    if found is None:
        return None
    return found.group(1) if found.group(1) is not None else found.group(2)


def _tool_name(written: str) -> str:
    """A written name as a name providers accept back in the transcript: "Order Status" is "Order_Status" (which
    the policy's alias matching reads as order_status). Nothing usable: UNREADABLE_CALL_NAME."""
    name = _NOT_NAME_RE.sub("_", written.strip())[:MAX_NAME_CHARS]
    return name if name.strip("_-") else UNREADABLE_CALL_NAME


def _refuse_constant(value: str) -> Any:
    raise ValueError(f"{value} is not JSON")


def _json(text: str) -> tuple[Any, bool]:
    """`text` read as strict JSON (no NaN or Infinity), and whether it could be."""
    try:
        return json.loads(text, parse_constant=_refuse_constant), True
    except (ValueError, RecursionError):  # too deep, or too many digits: not readable either
        return None, False


def _not_an_object(content: str) -> str:
    """What an unreadable block's arguments are: what the model wrote, unless that would read as a JSON object
    (or nothing: `{}`), which the policy might accept."""
    value, readable = _json(content.strip())
    if not content.strip() or (readable and isinstance(value, dict)):
        return UNREADABLE_ARGUMENTS
    return content.strip()


def _call_key(name: str, arguments: str) -> tuple[str, str]:
    """A written call as compared with the inputs: its name and its parsed arguments, canonical (a block quoted
    with its keys reordered or its spacing changed is the same block)."""
    parsed, ok = _json(arguments)
    canonical = json.dumps(parsed, sort_keys=True, ensure_ascii=False) if ok else arguments.strip()
    return name, canonical


def _strings(value: Any, found: list[str], budget: list[int]) -> None:
    """Every string of a JSON value, and the strings of a string that is JSON itself (a client tool's output is
    JSON text inside the result's JSON), at most `budget` of them."""
    if budget[0] <= 0:
        return
    if isinstance(value, str):
        budget[0] -= 1
        found.append(value)
        if value[:1] in "{[" and len(value) > 1:
            parsed, ok = _json(value)
            if ok:
                _strings(parsed, found, budget)
    elif isinstance(value, list):
        for item in value:
            _strings(item, found, budget)
    elif isinstance(value, dict):
        for key, item in value.items():
            _strings(key, found, budget)
            _strings(item, found, budget)


def _leaves(value: Any) -> list[str]:
    """The scalar values of parsed arguments, as text."""
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [] if value is None else [value if isinstance(value, str) else json.dumps(value)]


_MARKS: Final = ("<tool_call", "<invoke", "<function_calls", "<parameter")


@dataclass(frozen=True)
class Quoted:
    """The calls written in the run's inputs (as name and canonical arguments), and the inputs that hold a call
    block's markup at all (a block cut short, or escaped, still shows its name and values there)."""

    calls: frozenset[tuple[str, str]]
    marked: tuple[str, ...]


def quoted_in(inputs: Sequence[str], *, tools: Sequence[ToolSpec] = ()) -> Quoted:
    """What of the run's inputs — what the customer or the team wrote, tool results, passages, a client tool's
    output — reads as a tool call: a block the model writes back from one of them is a quotation, someone else's
    words, and never runs. A tool result is JSON text: the strings inside it are read too."""
    found: set[tuple[str, str]] = set()
    marked: list[str] = []
    for text in inputs:
        if "<" not in text:
            continue
        texts = [text]
        parsed, ok = _json(text)
        if ok and not isinstance(parsed, str):
            _strings(parsed, texts, [10_000])
        for piece in texts:
            lowered = piece.lower()
            if not any(mark in lowered for mark in _MARKS):
                continue
            marked.append(piece)
            written = recover_written_calls(piece, run_id="", round_number=0, tools=tools)
            found.update(_call_key(call.name, call.arguments) for call in written.calls)
    return Quoted(calls=frozenset(found), marked=tuple(marked))


def is_quoted(call: ToolCallRequest, quoted: Quoted) -> bool:
    """Whether the call is one of the inputs': the same block, or an input with call markup that holds its name and
    every value of its arguments."""
    if _call_key(call.name, call.arguments) in quoted.calls:
        return True
    parsed, ok = _json(call.arguments)
    values = _leaves(parsed) if ok else [call.arguments]
    return any(call.name in text and all(value in text for value in values) for text in quoted.marked)
