"""The one way a secret value is hidden in anything shown or stored: run steps, the egress log, model errors, the
tool editor's preview.

An upstream may echo a secret in any spelling it likes, so matching is done on a *decoded view* of the text, not
on the text itself: JSON escapes (`\\"`, `\\/`, `\\uXXXX` including surrogate pairs) and percent-encoding (`%XX`,
any case, UTF-8 sequences) are decoded, every secret is found there with `str.find` (linear: no regular expression
on hostile text), and the original spans it came from are replaced. So `tok\\/abc`, `\\u0074ok…` and `a%2Fb` all
mask like the plain value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

MASK = "\u2022\u2022\u2022\u2022"  # ••••
LAST_FOUR_MIN_LENGTH = 12  # shorter values show no characters at all

_JSON_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")


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


def decoded_view(text: str) -> tuple[str, list[int], list[int]]:
    """The text with JSON escapes and percent-encoding decoded, and for each decoded character the start and end
    of the original span it came from."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if char == "\\" and index + 1 < length:
            following = text[index + 1]
            if following in _JSON_SIMPLE_ESCAPES:
                out.append(_JSON_SIMPLE_ESCAPES[following])
                starts.append(index)
                ends.append(index + 2)
                index += 2
                continue
            if following == "u":
                code = _hex4(text, index + 2)
                if code is not None:
                    width = 6
                    if 0xD800 <= code < 0xDC00 and text[index + 6 : index + 8] == "\\u":
                        low = _hex4(text, index + 8)
                        if low is not None and 0xDC00 <= low < 0xE000:
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                            width = 12
                    out.append(chr(code))
                    starts.append(index)
                    ends.append(index + width)
                    index += width
                    continue
        elif char == "%":
            chars, run_end = _percent_run(text, index)
            if chars:
                position = index
                for decoded, width in chars:
                    out.append(decoded)
                    starts.append(position)
                    ends.append(position + width)
                    position += width
                index = run_end
                continue
        out.append(char)
        starts.append(index)
        ends.append(index + 1)
        index += 1
    return "".join(out), starts, ends


def mask_secrets(
    text: str, secret_values: Iterable[str], *, replacement: Callable[[str], str] | str = mask_secret
) -> str:
    """Every secret in `text` replaced, in whatever spelling it appears (plain, JSON-escaped, percent-encoded).

    `replacement` is the mask for a value (`••••` plus its last four characters by default) or a fixed string.
    """
    values = sorted({v for v in secret_values if isinstance(v, str) and v}, key=len, reverse=True)
    if not values or not text:
        return text
    decoded, starts, ends = decoded_view(text) if ("\\" in text or "%" in text) else (text, None, None)
    spans: list[tuple[int, int, str]] = []
    for value in values:
        found = decoded.find(value)
        while found != -1:
            end = found + len(value)
            if starts is None or ends is None:
                spans.append((found, end, value))
            else:
                spans.append((starts[found], ends[end - 1], value))
            found = decoded.find(value, found + 1)
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
