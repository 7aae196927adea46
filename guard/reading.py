"""The answer as the customer sees it: Markdown rendered to its words, folded as a reader reads them, in sentences.

SPEC §5: the guard reads the text as the customer sees it — Markdown rendered to words (emphasis, code spans, links,
lists, headings, tables), line breaks inside a sentence as spaces, format characters dropped, lookalikes folded.
This is done once, here, for the final answer and for the stream gate alike: `Reader` takes the answer as it
arrives and gives its sentences once each is whole; the whole-answer check feeds it everything at once, so both
read the same sentences.

Reading a word: HTML entities decoded, tags dropped, link syntax reduced to the link's text, the emphasis, code and
strike-through marks dropped (`*`, `` ` ``, `~`, and `_` where it isn't between two letters), then folded (`fold`):
NFKC; every format (Cf), control and combining character dropped, and tatweel; lookalike letters as Latin
(Unicode's confusables for Cyrillic, Greek, Armenian, Cherokee and Latin's own small capitals); every dash as `-`,
every apostrophe as `'`, every decimal digit as ASCII; Arabic letter forms unified (alef, yaa, taa marbuta, hamza
seats, Urdu's keheh and heh goal), as knowledge search reads them.

Reading lines: a single line break continues the sentence (Markdown renders it as a space), as U+2028 and U+2029
do; a blank line, a heading, a list item, a table row, a fence or a rule starts a new one. A heading's `#`s, a
list's bullet or number, a quote's `>`, a table's pipes and separator rows, fences and rules are not words.

Sentences end on `.`, `!`, `?`, `؟`, `。`, `।`, `۔` or `…` (closing quotes and brackets after them allowed) with
whitespace after — not after an abbreviation ("no.", "e.g.", a single letter) — or where a block ends.

Everything here is linear in the answer: each character is looked at a bounded number of times, and no regular
expression runs on it.
"""

from __future__ import annotations

import html
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Final, NamedTuple

# --- folding one word ------------------------------------------------------------------------------------------

_APOSTROPHES = str.maketrans(dict.fromkeys("\u2019\u2018\u201b\u02bc\u02bb\u02b9\u00b4\u2032\uff07\u0060", "'"))
# Every dash a reader takes for '-': Unicode's Dash_Punctuation (Pd), the minus signs and the hyphen bullet.
_DASHES = (
    "\u058a\u05be\u1400\u1806\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\u2796\u02d7\u2e17\u2e1a\u2e3a\u2e3b"
    "\u2e40\u2e5d\u301c\u3030\u30a0\ufe31\ufe32\ufe58\ufe63\uff0d\U00010ead"
)
# Letters that look like Latin ones, as Unicode's confusables data (UTS #39) maps them to a-z/A-Z. NFKC already reads
# the fullwidth, mathematical and other compatibility forms.
_LOOKALIKE_PAIRS = (
    ("АВЕЅІЈКМНОРСТХУҮҺԚԜӀЁЇ", "ABESIJKMHOPCTXYYHQWIEI"),  # Cyrillic
    ("аеоѕіјкмрстухһԁԛԝӏёї", "aeosijkmpctyxhdqwlei"),
    ("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧϹͿ", "ABEZHIKMNOPTYXCJ"),  # Greek
    ("αιγκνοηρτυϲϳ", "aiyknonptucj"),
    ("ՕՍՏԼօսհոզց", "OUSLouhnqg"),  # Armenian
    ("ᎪᏴᏟᎬᎻᎢᏦᎷᏢᏚᎳᏃᎫᏞᎠᏀᏙ", "ABCEHTKMPSWZJLDGV"),  # Cherokee
    ("ıȷɑɡɩɪᴄᴏᴜᴠᴡᴢꜱ", "ijagiicouvwzs"),  # Latin lookalikes
)
# Arabic-script letter forms read as one (as agents/knowledge/terms.py folds them for search): alef with hamza or
# madda, alef wasla; alef maqsura and Farsi yeh; taa marbuta, heh goal and Urdu's ae; hamza on waw and yeh; keheh.
_ARABIC_FORMS = {
    "\u0623": "\u0627", "\u0625": "\u0627", "\u0622": "\u0627", "\u0671": "\u0627",
    "\u0649": "\u064a", "\u06cc": "\u064a", "\u0626": "\u064a",
    "\u0629": "\u0647", "\u06c1": "\u0647", "\u06c3": "\u0647", "\u06d5": "\u0647", "\u06c0": "\u0647",
    "\u0624": "\u0648", "\u06a9": "\u0643",
}  # fmt: skip
_LOOKALIKES: Final[dict[int, str]] = {
    ord(char): latin for chars, latins in _LOOKALIKE_PAIRS for char, latin in zip(chars, latins, strict=True)
}
_AFTER_NFKC = str.maketrans(
    {
        **_LOOKALIKES,
        **dict.fromkeys(map(ord, _DASHES), "-"),
        **{ord(k): v for k, v in _ARABIC_FORMS.items()},
        **dict.fromkeys(map(ord, "\u2019\u2018\u201b\u02bc\u02bb\u02b9\u2032"), "'"),
    }
)
TATWEEL: Final = "\u0640"
# Blank letters: the Hangul fillers render as nothing.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0" + TATWEEL)


def fold(word: str) -> str:
    """One word (no whitespace) as a person reads it (see the module docstring). Latin letters keep their accents:
    the lexicons spell "annulée" and "storniert" as they are written."""
    if word.isascii() and word.isprintable():
        return word
    text = unicodedata.normalize("NFKC", word.translate(_APOSTROPHES)).translate(_AFTER_NFKC)
    out: list[str] = []
    for char in text:
        if char.isascii():
            if char.isprintable() and not char.isspace():
                out.append(char)
            continue
        category = unicodedata.category(char)
        if category[0] in "CZ" or char in _BLANK_LETTERS or char.isspace():
            continue
        if category[0] == "M" and not _keeps_mark(out):
            continue
        if category == "Nd":
            out.append(str(unicodedata.decimal(char)))
        else:
            out.append(char)
    return unicodedata.normalize("NFC", "".join(out)) if out and not "".join(out).isascii() else "".join(out)


def _keeps_mark(before: list[str]) -> bool:
    """Combining marks are dropped (Arabic's diacritics, a zero-width trick with U+0301), except on the scripts that
    spell with them: Devanagari's vowel signs and viramas, Latin accents written as a letter plus its mark (NFC puts
    them back together)."""
    if not before:
        return False
    last = before[-1]
    return "\u0900" <= last <= "\u097f" or (last.isascii() and last.isalpha())


# --- rendering Markdown ----------------------------------------------------------------------------------------

_EMPHASIS = str.maketrans(dict.fromkeys("*`~", ""))
_BULLETS = frozenset("-*+•·▪‣◦")
# Line breaks as Markdown sees them; U+2028 and U+2029 render as spaces inside a sentence (SPEC §5).
_LINE_BREAKS = frozenset("\n\x0b\x0c\r\x1c\x1d\x1e\x85")
SENTENCE_ENDS: Final = frozenset(".!?؟。।۔…")
_CLOSERS = "\"'”’»)]}*_"


def _strip_tags(word: str) -> str:
    """HTML tags out of one word (a tag becomes a space: `a<br>b` is two words); `<https://…>` keeps its URL."""
    out: list[str] = []
    i = 0
    while i < len(word):
        char = word[i]
        if char == "<":
            close = word.find(">", i + 1)
            inner = word[i + 1 : close] if close != -1 else ""
            if close != -1 and inner and (inner[0].isalpha() or inner[0] == "/"):
                out.append(inner if "://" in inner or "@" in inner else " ")
                i = close + 1
                continue
        out.append(char)
        i += 1
    return "".join(out)


def _strip_links(word: str) -> str:
    """`[text](url)` and `![alt](url)` as their text, within one word (the URL has no spaces)."""
    if word.startswith("!["):
        word = word[2:]
    elif word.startswith("["):
        word = word[1:]
    cut = word.find("](")
    if cut != -1:
        close = word.find(")", cut + 2)
        word = word[:cut] + (word[close + 1 :] if close != -1 else "")
    return word.replace("[", "").replace("]", "") if "](" not in word and ("[" in word or "]" in word) else word


def _strip_underscores(word: str) -> str:
    """`_` is emphasis unless it joins two letters or digits (`snake_case` stays, `_TKT-1234_` is TKT-1234)."""
    if "_" not in word:
        return word
    chars = list(word)
    kept = [
        char
        for i, char in enumerate(chars)
        if char != "_" or (0 < i < len(chars) - 1 and chars[i - 1].isalnum() and chars[i + 1].isalnum())
    ]
    return "".join(kept)


def render_word(raw: str) -> list[str]:
    """One whitespace-free piece of the answer as the customer reads it: zero or more words."""
    word = raw
    if "&" in word:
        word = html.unescape(word)
    if "<" in word:
        word = _strip_tags(word)
    if "[" in word or "]" in word:
        word = _strip_links(word)
    if "\\" in word:
        word = word.replace("\\", "")
    word = _strip_underscores(word.translate(_EMPHASIS))
    out = []
    for piece in word.split():
        folded = fold(piece)
        if folded:
            out.append(folded)
    return out


class Word(NamedTuple):
    text: str  # rendered and folded: never empty, no whitespace
    end: int  # where the word ends in the answer as written (its Markdown included)


class Sentence(NamedTuple):
    words: tuple[str, ...]  # rendered and folded
    end: int  # where its last word ends in the answer as written
    # The same words with each zero-width character read as a space (a model may join two words with one: both
    # readings are checked), or None when the sentence has none.
    split: tuple[str, ...] | None = None

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def asks(self) -> bool:
        """It ends on a question mark."""
        last = self.words[-1].rstrip(_CLOSERS) if self.words else ""
        return last.endswith(("?", "؟"))


def _is_marker_of_list(word: str) -> bool:
    if word in _BULLETS:
        return True
    number, _, end = word[:-1], None, word[-1:]
    return end in (".", ")") and 0 < len(number) <= 9 and number.isdigit()


def _only(word: str, chars: str) -> bool:
    return bool(word) and all(char in chars for char in word)


class Reader:
    """The answer read as it arrives: `feed(chunk)` answers the sentences that became whole, `close()` the rest.

    A word is read once whitespace follows it (or at `close()`); a line's first word says whether the line break
    before it ended the sentence (a new block) or was a space (the same paragraph)."""

    def __init__(self, abbreviations: frozenset[str] = frozenset()) -> None:
        self._abbreviations = abbreviations
        self._piece: list[str] = []  # the non-whitespace run being written
        self._read = 0  # characters of the answer read
        self._piece_end = 0
        self._words: list[str] = []  # the sentence being read
        self._split: list[str] = []  # its words with zero-width characters read as spaces
        self._has_split = False
        self._table_line = False  # the line being read is a table row
        self._quote_line = False  # the line being read is quoted (`>`)
        self._end = 0
        self._line_start = True  # the next piece is the first of its line
        self._breaks = 0  # line breaks in the whitespace before the next piece
        self._block_line = False  # the line being read is a heading or a table row: it ends its sentence
        self._in_code = False  # inside a fenced code block: every line is its own
        self._skip_line = False  # a fence's info string, a table's separator row

    def feed(self, chunk: str) -> list[Sentence]:
        out: list[Sentence] = []
        for run in _runs(chunk):
            self._read += len(run)
            if run[0] in _SPACE_SET:
                self._space(run, out)
            else:
                self._piece.append(run)
                self._piece_end = self._read
        return out

    def close(self) -> list[Sentence]:
        out: list[Sentence] = []
        self._end_piece(out)
        self._end_sentence(out)
        return out

    def _space(self, run: str, out: list[Sentence]) -> None:
        self._end_piece(out)
        breaks = sum(1 for char in run if char in _LINE_BREAKS) - run.count("\r\n")
        if breaks:
            self._breaks += breaks
            self._line_start = True
            self._skip_line = False
            self._table_line = False
            if self._block_line or self._in_code:
                self._block_line = False
                self._end_sentence(out)

    def _end_piece(self, out: list[Sentence]) -> None:
        if not self._piece:
            return
        raw = "".join(self._piece)
        self._piece = []
        first = self._line_start
        self._line_start = False
        if first:
            new_block = self._breaks >= 2
            self._breaks = 0
            if new_block:
                self._end_sentence(out)
            if not self._first_of_line(raw, out):
                return
        if self._skip_line or (self._table_line and _only(raw, "|-: ")):
            return
        if self._table_line and "|" in raw:
            raw = raw.replace("|", " ")
        texts = render_word(raw)
        split = render_word(raw.translate(_ZERO_WIDTH_AS_SPACE)) if not _ZERO_WIDTH.isdisjoint(raw) else texts
        if split != texts:
            self._has_split = True
        self._split.extend(split)
        for text in texts:
            self._words.append(text)
            self._end = self._piece_end
            if self._ends_sentence(text):
                self._end_sentence(out)

    def _first_of_line(self, raw: str, out: list[Sentence]) -> bool:
        """Reads a line's Markdown block marker; False when the piece is that marker (not a word)."""
        if raw.startswith(("```", "~~~")):
            self._end_sentence(out)
            self._in_code = not self._in_code
            self._skip_line = True
            return False
        if self._in_code:
            return True
        if _only(raw, "#") and len(raw) <= 6:
            self._end_sentence(out)
            self._block_line = True
            return False
        if raw.startswith("|"):
            self._end_sentence(out)
            self._block_line = self._table_line = True
            if _only(raw, "|-: ") and "-" in raw:
                self._skip_line = True  # a table's separator row
                return False
            return True
        quote = _only(raw, ">")
        if quote != self._quote_line:
            self._end_sentence(out)  # a quote starts or ends: a block of its own
        self._quote_line = quote
        if quote:
            return False
        if _is_marker_of_list(raw):
            self._end_sentence(out)
            return False
        if len(raw) >= 3 and (_only(raw, "-") or _only(raw, "*") or _only(raw, "_") or _only(raw, "=")):
            self._end_sentence(out)  # a rule, or a setext heading's underline
            self._skip_line = True
            return False
        return True

    def _ends_sentence(self, text: str) -> bool:
        if text in _PIPES:
            return False
        core = text.rstrip(_CLOSERS)
        if not core or core[-1] not in SENTENCE_ENDS:
            return False
        if core[-1] == ".":
            lowered = core.lower()
            if lowered in self._abbreviations or (len(core) == 2 and core[0].isalpha()):
                return False
        return True

    def _end_sentence(self, out: list[Sentence]) -> None:
        words = [word for word in self._words if word not in _PIPES]
        split = tuple(word for word in self._split if word not in _PIPES) if self._has_split else None
        self._words, self._split, self._has_split = [], [], False
        if words:
            out.append(Sentence(tuple(words), self._end, split))


_PIPES = frozenset({"|"})
_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u180e")
_ZERO_WIDTH_AS_SPACE = dict.fromkeys(map(ord, _ZERO_WIDTH), " ")
_SPACE_SET = frozenset(
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    + "".join(chr(cp) for cp in range(0x2000, 0x200B))
)


def _runs(text: str) -> Iterator[str]:
    """Runs of whitespace and of anything else, in order (no regular expression: one pass over the text)."""
    start = 0
    length = len(text)
    while start < length:
        space = text[start] in _SPACE_SET
        end = start + 1
        while end < length and (text[end] in _SPACE_SET) == space:
            end += 1
        yield text[start:end]
        start = end


def sentences(text: str, abbreviations: frozenset[str] = frozenset()) -> list[Sentence]:
    """The whole answer's sentences, read as the stream gate reads them."""
    reader = Reader(abbreviations)
    return [*reader.feed(text), *reader.close()]


def rendered(text: str, abbreviations: frozenset[str] = frozenset()) -> str:
    """The answer as the guard reads it, one sentence a line (for people: the dashboard, the bench, tests)."""
    return "\n".join(sentence.text for sentence in sentences(text, abbreviations))


def words_of(texts: Iterable[str]) -> Iterator[str]:
    """Every rendered word of some source texts (instructions, messages, passages): for the facts they hold."""
    for text in texts:
        for run in _runs(text):
            if run[0] not in _SPACE_SET:
                yield from render_word(run)
