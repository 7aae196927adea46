"""The one way a secret value is hidden in anything shown or stored: run steps, the egress log, model errors, the
tool editor's preview.

An upstream may echo a secret in any spelling it likes, so matching is done on a *decoded view* of the text, not
on the text itself: JSON escapes (`\\"`, `\\/`, `\\uXXXX` including surrogate pairs) and percent-encoding (`%XX`,
any case, UTF-8 sequences) are decoded, characters a reader never sees (`is_hidden`: zero-width, bidi and other
format characters, controls, variation selectors) are left out of the view, every secret is found there with
`str.find` (linear: no regular expression on hostile text), and the original spans it came from are replaced. So
`tok\\/abc`, `\\u0074ok…`, `a%2Fb` and `to\\u200bk…` all mask like the plain value: an upstream can't hide a secret
from the mask with characters that the cleaning of what the model sees (tools.shaping) then removes.

The view also reads HTML character references (`&#116;`, `&#x74;`, `&amp;`, …) and fullwidth forms (`ｔｏｋ`) as the
characters they stand for, and the search ignores case (a secret echoed upper-cased). Each secret is also looked
for as its hexadecimal and its base64 (standard and URL-safe alphabets, at each of the three alignments inside a
longer base64 text, e.g. a Basic authorization echoed back): the second security review's spellings. What can't be
found: a secret split across fields or lines, encoded in another way (compressed, encrypted, base32, reversed…), or
only a part of it echoed.
"""

from __future__ import annotations

import base64
import bisect
import json
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from html.entities import html5
from typing import overload

import regex

MASK = "\u2022\u2022\u2022\u2022"  # ••••
LAST_FOUR_MIN_LENGTH = 12  # shorter values show no characters at all

_JSON_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")

# Line breaks and tabs: shown (as spaces), so never hidden.
LINE_BREAKS = frozenset("\t\n\r\v\f\x85\u2028\u2029")
# Invisible characters outside the Cc/Cf categories that can hide text from a reader.
_INVISIBLE = frozenset(
    [chr(c) for c in range(0xFE00, 0xFE10)]  # variation selectors
    + [chr(c) for c in range(0xE0100, 0xE01F0)]  # variation selectors supplement
    + ["\u115f", "\u1160", "\u3164", "\uffa0", "\u034f"]  # Hangul fillers, combining grapheme joiner
)


def is_hidden(char: str) -> bool:
    """A character a reader never sees: controls (not line breaks), surrogates, format characters (zero-width,
    bidi, joiners, tags…), variation selectors, Hangul fillers. The cleaning of text shown to the model removes
    these (keeping the Arabic joiners ZWJ/ZWNJ), and masking looks through them."""
    if char in _INVISIBLE:
        return True
    if char.isprintable() or char in LINE_BREAKS:
        return False
    return unicodedata.category(char) in ("Cc", "Cs", "Cf")


def mask_secret(value: str) -> str:
    """`••••` plus the last four characters (only for secrets long enough that four reveal little)."""
    return MASK + value[-4:] if len(value) >= LAST_FOUR_MIN_LENGTH else MASK


def _hex4(text: str, at: int) -> int | None:
    chunk = text[at : at + 4]
    if len(chunk) == 4 and all(c in _HEX for c in chunk):
        return int(chunk, 16)
    return None


def _percent_run(text: str, at: int) -> tuple[list[tuple[str, int]], int]:
    """Decodes consecutive %XX bytes starting at `at` as UTF-8: [(char, width in text)], and where the run ends."""
    raw: list[int] = []
    end = at
    while end + 2 < len(text) and text[end] == "%" and text[end + 1] in _HEX and text[end + 2] in _HEX:
        raw.append(int(text[end + 1 : end + 3], 16))
        end += 3
    chars: list[tuple[str, int]] = []
    index = 0
    while index < len(raw):
        first = raw[index]
        size = 1 if first < 0x80 else 2 if first >> 5 == 0b110 else 3 if first >> 4 == 0b1110 else 4
        piece = bytes(raw[index : index + size])
        try:
            char = piece.decode("utf-8")
        except UnicodeDecodeError:
            char, size = chr(first), 1  # not UTF-8: keep the byte as a character of its own
        chars.append((char, 3 * size))
        index += size
    return chars, end


# Where the view may differ from the text: an escape, a percent sign, or a character that may be hidden (is_hidden
# decides; line breaks match the class too), an ampersand (an HTML character reference) or a fullwidth character.
_SPECIAL_RE = regex.compile(  # linear: a single character class, one character per attempt
    r"[\\%&\uFF01-\uFF5E\p{Cc}\p{Cf}\p{Cs}\uFE00-\uFE0F\U000E0100-\U000E01EF\u115F\u1160\u3164\uFFA0\u034F]"
)
_ENTITY_MAX = 32  # the longest character reference looked at: `&` up to its `;`


def _entity_at(text: str, index: int) -> tuple[str, int] | None:
    """An HTML character reference at `index` (`&#116;`, `&#x74;`, `&amp;`…): the character and its width."""
    end = text.find(";", index + 1, index + _ENTITY_MAX)
    if end == -1:
        return None
    body = text[index + 1 : end]
    try:
        if body[:2] in ("#x", "#X"):
            code = int(body[2:], 16) if body[2:] and all(c in _HEX for c in body[2:]) else -1
        elif body[:1] == "#":
            code = int(body[1:]) if body[1:].isdigit() and body[1:].isascii() else -1
        else:
            named = html5.get(body + ";")
            return (named, end + 1 - index) if named and len(named) == 1 else None
        return (chr(code), end + 1 - index) if 0 < code < 0x110000 else None
    except ValueError:
        return None


def _decode_at(text: str, index: int) -> list[tuple[str, int]]:
    """The character(s) the text holds at `index`, decoded: [(character, width in text)]."""
    char = text[index]
    if char == "\\" and index + 1 < len(text):
        following = text[index + 1]
        if following in _JSON_SIMPLE_ESCAPES:
            return [(_JSON_SIMPLE_ESCAPES[following], 2)]
        if following == "u":
            code = _hex4(text, index + 2)
            if code is not None:
                width = 6
                if 0xD800 <= code < 0xDC00 and text[index + 6 : index + 8] == "\\u":
                    low = _hex4(text, index + 8)
                    if low is not None and 0xDC00 <= low < 0xE000:
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        width = 12
                return [(chr(code), width)]
    elif char == "%":
        chars = _percent_run(text, index)[0]
        if chars:
            return chars
    elif char == "&":
        entity = _entity_at(text, index)
        if entity is not None:
            return [entity]
    elif "\uff01" <= char <= "\uff5e":  # fullwidth ASCII
        return [(chr(ord(char) - 0xFEE0), 1)]
    return [(char, 1)]


class _Spans(Sequence[int]):
    """For each character of a view, where its original span starts (or ends) in the text. Kept as runs (a plain
    stretch maps one to one), so a megabyte of text costs a list per run, not per character."""

    def __init__(self, runs: list[tuple[int, int, int, int]], length: int, *, ends: bool) -> None:
        self._runs = runs  # (view start, text start, characters, width of one: 0 for a plain stretch)
        self._firsts = [run[0] for run in runs]
        self._length = length
        self._ends = ends

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        view_start, text_start, _count, width = self._runs[bisect.bisect_right(self._firsts, index) - 1]
        if width == 0:
            return text_start + (index - view_start) + (1 if self._ends else 0)
        return text_start + (width if self._ends else 0)


def decoded_view(text: str) -> tuple[str, Sequence[int], Sequence[int]]:
    """The text with JSON escapes and percent-encoding decoded and hidden characters left out, and for each
    character of the view the start and end of the original span it came from (a hidden character left out falls
    between two spans, so a match across it covers it)."""
    out: list[str] = []
    runs: list[tuple[int, int, int, int]] = []
    size = 0  # characters in the view so far
    index = 0
    for found in _SPECIAL_RE.finditer(text):
        stop = found.start()
        if stop < index:
            continue  # inside an escape or percent run already decoded
        if stop > index:  # plain characters, as they are
            out.append(text[index:stop])
            runs.append((size, index, stop - index, 0))
            size += stop - index
            index = stop
        for piece, width in _decode_at(text, index):
            if not is_hidden(piece):
                out.append(piece)
                runs.append((size, index, 1, width))
                size += 1
            index += width
    if index < len(text):
        out.append(text[index:])
        runs.append((size, index, len(text) - index, 0))
        size += len(text) - index
    return "".join(out), _Spans(runs, size, ends=False), _Spans(runs, size, ends=True)


def mask_secrets(
    text: str, secret_values: Iterable[str], *, replacement: Callable[[str], str] | str = mask_secret
) -> str:
    """Every secret in `text` replaced, in whatever spelling it appears (plain, JSON-escaped, percent-encoded).

    `replacement` is the mask for a value (`••••` plus its last four characters by default) or a fixed string.
    """
    # A secret is looked for as a reader sees it: without hidden characters (a secret of nothing else is no secret).
    visible = ("".join(ch for ch in v if not is_hidden(ch)) for v in secret_values if isinstance(v, str))
    secrets = {v for v in visible if v}
    if not secrets or not text:
        return text
    # Every spelling looked for, lower-cased (the search ignores case), with the secret it stands for.
    forms: dict[str, str] = {}
    for secret in sorted(secrets, key=len):
        for form in (secret, *_encodings(secret)):
            forms[_lower(form)] = secret
    decoded, starts, ends = decoded_view(text) if _SPECIAL_RE.search(text) else (text, None, None)
    decoded = _lower(decoded)
    spans: list[tuple[int, int, str]] = []
    for form, value in sorted(forms.items(), key=lambda item: len(item[0]), reverse=True):
        found = decoded.find(form)
        while found != -1:
            end = found + len(form)
            if starts is None or ends is None:
                spans.append((found, end, value))
            else:
                spans.append((starts[found], ends[end - 1], value))
            found = decoded.find(form, found + 1)
    if not spans:
        return text
    # Overlapping matches (two secrets sharing characters, or one secret overlapping itself) become one masked span.
    spans.sort(key=lambda span: (span[0], -span[1]))
    merged: list[tuple[int, int, str]] = []
    for start, end, value in spans:
        if merged and start < merged[-1][1]:
            first_start, first_end, first_value = merged[-1]
            merged[-1] = (first_start, max(first_end, end), first_value)
        else:
            merged.append((start, end, value))
    pieces: list[str] = []
    cursor = 0
    for start, end, value in merged:
        pieces.append(text[cursor:start])
        pieces.append(replacement if isinstance(replacement, str) else replacement(value))
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


ENCODED_MIN = 8  # an encoded form shorter than this is left unsearched (it would match ordinary text)
HEX_MIN_BYTES = 8


def _lower(text: str) -> str:
    """Lower case, one character for one (a character whose lower case is longer stays as it is: the view's spans
    map character to character)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(low if len(low := char.lower()) == 1 else char for char in text)


def _encodings(secret: str) -> list[str]:
    """The secret's hexadecimal and the parts of its base64 that don't depend on what surrounds it: inside a longer
    base64 text it may start at any of three byte alignments, and the characters that mix its bits with its
    neighbours' are left out."""
    raw = secret.encode()
    # Hexadecimal only for a secret of 8 bytes or more: a shorter one's hex is a number an answer may well hold.
    found = [raw.hex()] if len(raw) >= HEX_MIN_BYTES else []
    for lead in range(3):
        encoded = base64.b64encode(b"\0" * lead + raw).decode().rstrip("=")
        skip = (0, 2, 3)[lead]
        tail = (lead + len(raw)) % 3  # bytes in the last group: its last character mixes in the padding's bits
        core = encoded[skip : len(encoded) - (1 if tail else 0)]
        if len(core) >= ENCODED_MIN:
            found += [core, core.replace("+", "-").replace("/", "_")]
    return found


def mask_secrets_in_json(value: object, secrets: Sequence[str]) -> object:
    """`value` (parsed JSON) with every secret masked in its keys and strings, at any depth: masked in its serialized
    text and read back, as an upstream's JSON body is masked before it is parsed. Raises ValueError when that can't
    be done (nested too deeply to write, or a secret that spanned the JSON's own syntax): the caller refuses the
    value then, never shows it unmasked."""
    if not secrets:
        return value
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return json.loads(mask_secrets(text, tuple(secrets)))
    except (TypeError, RecursionError) as exc:
        raise ValueError("the value can't be masked") from exc
