"""A text or Markdown source split into passages, so a search returns the part of a long document that answers.

Split by headings first (ATX `#` headings, setext underlines, and a line that is only bold text, as FAQ pages
write their questions), then by paragraphs, packed into passages of about TARGET_WORDS words and never more than
MAX_WORDS (a longer paragraph is cut between sentences, a longer sentence between words). Each passage keeps the
trail of headings above it as its title ("Returns › Refunds › Card payments"), so a passage that never repeats the
topic's name still matches it. Markdown markup that means nothing to a reader (emphasis, link targets, code fences)
is dropped from the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from agents.knowledge.terms import fold

TARGET_WORDS: Final = 200
MAX_WORDS: Final = 300
MIN_WORDS: Final = 40  # a shorter last piece of a section joins the one before it
TITLE_SEPARATOR: Final = " › "
MAX_TITLE_CHARS: Final = 300

# Headings, bold lines and link targets are read by the string scans below: as regular expressions they backtrack
# quadratically on hostile lines (a heading of 20,000 spaces took seconds). What is left is linear:
# linear: anchored; the underline's class and the trailing blanks' class don't overlap
_SETEXT_RE: Final = re.compile(r"^ {0,3}(={3,}|-{3,})[ \t]*$")
# linear: anchored, a bounded run of spaces and a fixed literal
_FENCE_RE: Final = re.compile(r"^ {0,3}(```|~~~)")
# linear: one character class after a one-character look-behind, or one class
_SENTENCE_END_RE: Final = re.compile(r"(?<=[.!?؟۔…])\s+|\n+")
# linear: short alternatives with one-character look-arounds, or one backtick run
_EMPHASIS_RE: Final = re.compile(r"(\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|`+)")
_BLANKS: Final = " \t"
_MAX_BOLD_HEADING: Final = 200
_BOLD_HEADING_LEVEL: Final = 7  # below every Markdown heading level


@dataclass(frozen=True)
class PassageDraft:
    title: str
    text: str
    words: int


def _without_targets(line: str, *, images: bool) -> str:
    """`![alt](target)` as `alt` (images) or `[text](target)` as `text`, in one left-to-right pass."""
    out: list[str] = []
    done = 0  # everything before this is in `out`
    searched = 0
    while True:
        opening = line.find("[", searched)
        closing = line.find("]", opening + 1) if opening >= 0 else -1
        if closing < 0:
            break
        # Any "[" between `opening` and `closing` ends at the same "]": one look decides for all of them.
        searched = closing + 1
        if not line.startswith("(", closing + 1):
            continue
        end = line.find(")", closing + 2)
        if end < 0:
            break  # no ")" left: no target can end
        is_image = opening > 0 and line[opening - 1] == "!"
        text = line[opening + 1 : closing]
        if is_image != images or (not images and not text):
            continue
        out.append(line[done : opening - 1 if images else opening])
        out.append(text)
        done = searched = end + 1
    out.append(line[done:])
    return "".join(out)


def _plain(line: str) -> str:
    line = _without_targets(line, images=True)
    line = _without_targets(line, images=False)
    return _EMPHASIS_RE.sub("", line)


def _indent_ok(line: str) -> str | None:
    """The line without up to three leading spaces (Markdown's allowance), or None when indented more."""
    stripped = line.lstrip(" ")
    return stripped if len(line) - len(stripped) <= 3 else None


def _atx_heading(line: str) -> tuple[int, str] | None:
    """`## Title ##` as (2, "Title"): one to six #, a blank, the title, an optional closing run of #."""
    rest = _indent_ok(line)
    if rest is None or not rest.startswith("#"):
        return None
    level = len(rest) - len(rest.lstrip("#"))
    after = rest[level:]
    if not 1 <= level <= 6 or not after or after[0] not in _BLANKS:
        return None
    title = after.strip(_BLANKS)
    unclosed = title.rstrip("#")
    if len(unclosed) < len(title) and (not unclosed or unclosed[-1] in _BLANKS):
        title = unclosed.rstrip(_BLANKS)
    return level, title


def _bold_heading(line: str) -> str | None:
    """A line that is only bold text (**Question?** or __Question__:), as FAQ pages write their questions."""
    rest = _indent_ok(line)
    if rest is None or rest[:2] not in ("**", "__"):
        return None
    body = rest[2:]
    end = min((i for i in (body.find("*"), body.find("_")) if i >= 0), default=-1)
    if not 1 <= end <= _MAX_BOLD_HEADING or body[end : end + 2] not in ("**", "__"):
        return None
    if body[end + 2 :].strip(_BLANKS) not in ("", ":"):
        return None
    return body[:end]


@dataclass
class _Section:
    trail: tuple[str, ...]
    lines: list[str]


def _setext_as_atx(lines: list[str]) -> list[str]:
    """A one-line paragraph underlined with === or --- is a heading (CommonMark's setext headings)."""
    out: list[str] = []
    skip = False
    for index, line in enumerate(lines):
        if skip:
            skip = False
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        starts_paragraph = index == 0 or not lines[index - 1].strip()
        if line.strip() and starts_paragraph and _SETEXT_RE.match(following) and not _FENCE_RE.match(line):
            out.append(("# " if following.strip()[0] == "=" else "## ") + line.strip())
            skip = True
        else:
            out.append(line)
    return out


def _sections(content: str) -> Iterator[_Section]:
    """The text under each heading, with the trail of headings above it."""
    stack: list[tuple[int, str]] = []
    section = _Section((), [])
    fenced = False
    for line in _setext_as_atx(content.replace("\r\n", "\n").replace("\r", "\n").split("\n")):
        if _FENCE_RE.match(line):
            fenced = not fenced
            continue
        heading: tuple[int, str] | None = None
        if not fenced:
            heading = _atx_heading(line)
            if heading is None:
                bold = _bold_heading(line)
                heading = (_BOLD_HEADING_LEVEL, bold) if bold is not None else None
        if heading is None:
            section.lines.append(line)
            continue
        yield section
        level, text = heading
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, " ".join(_plain(text).split())))
        section = _Section(tuple(name for _, name in stack if name), [])
    yield section


def _paragraphs(lines: list[str]) -> Iterator[str]:
    block: list[str] = []
    for line in lines:
        if line.strip():
            block.append(_plain(line.rstrip()))
        elif block:
            yield "\n".join(block)
            block = []
    if block:
        yield "\n".join(block)


def _units(paragraph: str) -> Iterator[str]:
    """A paragraph, or its sentences (or word runs) when it is longer than a passage may be."""
    if len(paragraph.split()) <= MAX_WORDS:
        yield paragraph
        return
    for sentence in _SENTENCE_END_RE.split(paragraph):
        words = sentence.split()
        for start in range(0, len(words), MAX_WORDS):
            if words[start : start + MAX_WORDS]:
                yield " ".join(words[start : start + MAX_WORDS])


def _pack(units: list[str]) -> list[list[str]]:
    chunks: list[list[str]] = []
    current: list[str] = []
    count = 0
    for unit in units:
        size = len(unit.split())
        if current and (count + size > MAX_WORDS or count >= TARGET_WORDS):
            chunks.append(current)
            current, count = [], 0
        current.append(unit)
        count += size
    if current:
        last = sum(len(unit.split()) for unit in current)
        if chunks and last < MIN_WORDS and last + sum(len(u.split()) for u in chunks[-1]) <= MAX_WORDS:
            chunks[-1].extend(current)
        else:
            chunks.append(current)
    return chunks


def passage_title(source_title: str, trail: tuple[str, ...]) -> str:
    parts = [source_title.strip()]
    for name in trail:
        if name and fold(name) != fold(parts[-1]):
            parts.append(name)
    return TITLE_SEPARATOR.join(part for part in parts if part)[:MAX_TITLE_CHARS]


def split_text(*, source_title: str, content: str) -> list[PassageDraft]:
    """The passages of a text or Markdown source, in document order."""
    drafts: list[PassageDraft] = []
    for section in _sections(content):
        units = [unit for paragraph in _paragraphs(section.lines) for unit in _units(paragraph)]
        title = passage_title(source_title, section.trail)
        for chunk in _pack(units):
            text = "\n\n".join(chunk).strip()
            if text:
                drafts.append(PassageDraft(title=title, text=text, words=len(text.split())))
    return drafts
