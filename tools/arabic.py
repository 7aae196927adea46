"""Arabic-aware text folding for matching (search_knowledge) and digit reading (templating).

Seed, "Templating rules": Arabic-Indic digits are converted to ASCII before checks, so `٨٨١٢` and `8812` are the same
order number. SPEC §6: search is Arabic-aware: diacritics and tatweel removed, alef/yaa/taa-marbuta forms unified,
Arabic-Indic digits read as ASCII.
"""

from __future__ import annotations

import unicodedata
from typing import Final

# U+0660–U+0669 Arabic-Indic and U+06F0–U+06F9 extended (Persian/Urdu) Arabic-Indic digits.
_DIGITS: Final[dict[int, str]] = {
    **{0x0660 + i: str(i) for i in range(10)},
    **{0x06F0 + i: str(i) for i in range(10)},
}

# Marks that change pronunciation, not the word: harakat, shadda, sukun, superscript alef, Quranic annotation signs.
_MARK_RANGES: Final[tuple[tuple[int, int], ...]] = (
    (0x0610, 0x061A),
    (0x064B, 0x065F),
    (0x0670, 0x0670),
    (0x06D6, 0x06DC),
    (0x06DF, 0x06E4),
    (0x06E7, 0x06E8),
    (0x06EA, 0x06ED),
)
_TATWEEL: Final = 0x0640
# Invisible controls that split otherwise equal words: zero-width characters, bidi marks, the Arabic letter mark.
_INVISIBLE: Final[tuple[int, ...]] = (
    0x061C,
    0x200B,
    0x200C,
    0x200D,
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    0xFEFF,
)

_LETTERS: Final[dict[int, str]] = {
    0x0623: "\u0627",  # أ -> ا
    0x0625: "\u0627",  # إ -> ا
    0x0622: "\u0627",  # آ -> ا
    0x0671: "\u0627",  # ٱ (alef wasla) -> ا
    0x0649: "\u064a",  # ى (alef maqsura) -> ي
    0x06CC: "\u064a",  # ی (Farsi yeh, common from Persian keyboards) -> ي
    0x0629: "\u0647",  # ة -> ه
}

_FOLD: Final[dict[int, str | None]] = {
    **{cp: None for start, end in _MARK_RANGES for cp in range(start, end + 1)},
    _TATWEEL: None,
    **dict.fromkeys(_INVISIBLE),
    **_LETTERS,
    **_DIGITS,
}


def normalize_digits(text: str) -> str:
    """Arabic-Indic and extended Arabic-Indic digits as ASCII; nothing else changes (safe for values sent to APIs)."""
    return text.translate(_DIGITS)


def normalize_arabic(text: str) -> str:
    """Fold `text` for matching: two spellings a reader takes for the same word give the same string.

    NFKC first so presentation forms (ﻻ, ﺃ, copied from PDFs) become plain letters; then diacritics, tatweel and
    invisible controls removed, alef/yaa/taa-marbuta forms unified, digits made ASCII, and the result casefolded.
    For matching only: the output is not meant to be shown or sent anywhere.
    """
    return unicodedata.normalize("NFKC", text).translate(_FOLD).casefold()
