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

_ATX_RE: Final = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT_RE: Final = re.compile(r"^ {0,3}(={3,}|-{3,})[ \t]*$")
_BOLD_LINE_RE: Final = re.compile(r"^ {0,3}(?:\*\*|__)(?P<text>[^*_\n]{1,200}?)(?:\*\*|__)[ \t]*:?[ \t]*$")
_FENCE_RE: Final = re.compile(r"^ {0,3}(```|~~~)")
_SENTENCE_END_RE: Final = re.compile(r"(?<=[.!?؟۔…])\s+|\n+")
_IMAGE_RE: Final = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK_RE: Final = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_EMPHASIS_RE: Final = re.compile(r"(\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|`+)")
_BOLD_HEADING_LEVEL: Final = 7  # below every Markdown heading level


@dataclass(frozen=True)
class PassageDraft:
    title: str
    text: str
    words: int


def _plain(line: str) -> str:
    line = _IMAGE_RE.sub(r"\1", line)
    line = _LINK_RE.sub(r"\1", line)
    return _EMPHASIS_RE.sub("", line)


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
            atx = _ATX_RE.match(line)
            bold = _BOLD_LINE_RE.match(line)
            if atx:
                heading = (len(atx.group(1)), atx.group(2))
            elif bold:
                heading = (_BOLD_HEADING_LEVEL, bold.group("text"))
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
