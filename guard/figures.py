"""Numbers as values, and references as codes: how a figure or a reference of an answer is found in a source.

A figure is compared as a value: `30`, `thirty`, `٣٠`, `30 days`, `1,299.00`, `1.299,00` and `1299` are the same
figure (a literal with separators is read every way it can be: as thousands, as decimals; a source's value matches
if any reading of the answer's does). A literal holding several numbers (a date `09/12/2026`, a range `5-7`, a time
`14:30`) is grounded when each of them is; a time's `:00` names no figure.

A reference is compared as a code: letters upper-cased, separators dropped, digit runs without leading zeros
(`TKT-0099`, `tkt 99` and `TKT99` are one code); a bare number is also found among a source's digit runs
(`48213` in `TKT-48213`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Final

_SEPARATORS: Final = frozenset(".,'\u066b\u066c\u00a0\u202f")  # '٫' decimal, '٬' thousands (after folding: digits)
_ORDINALS: Final = ("st", "nd", "rd", "th", "er", "e", "eme", "ème", "º", "ª", "o", "a", "te", "ste", "de", "inci",
                    "nci", "ıncı", "inci", "uncu", "üncü")  # fmt: skip
# Letters after a number that make it a figure with its unit, not a code ("9am", "15min", "2x", "5kg", "30d").
_UNITS: Final = frozenset({
    "am", "pm", "h", "hr", "hrs", "min", "mins", "m", "s", "sec", "d", "w", "kg", "g", "km", "mi", "ml", "l", "x",
    "k", "gb", "mb", "tb", "cm", "mm", "usd", "eur", "gbp", "sar", "aed", "inr", "try", "tl", "idr", "rp", "rs",
    "pkr", "qar", "kwd", "bhd", "omr", "egp", "mxn", "brl", "r", "chf", "jpy", "cad", "aud", "uhr", "days", "day",
    "hours", "j", "jours", "dias", "días", "gün", "hari", "giorni", "dagen", "tage", "tagen", "st", "nd", "rd", "th",
})  # fmt: skip


def canonical(literal: str) -> str:
    """A decimal value as text: no leading zeros, no trailing fraction zeros ("0099" -> "99", "15.50" -> "15.5")."""
    whole, _, fraction = literal.partition(".")
    whole = whole.lstrip("0") or "0"
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def readings(literal: str) -> frozenset[str]:
    """Every value a literal of digits and separators can be: "1,299.00" -> {1299}, "1.299" -> {1.299, 1299}."""
    digits_only = "".join(char for char in literal if char.isdigit())
    found = {canonical(digits_only)}
    separators = [char for char in literal if char in _SEPARATORS]
    if not separators:
        return frozenset(found)
    last = literal.rfind(separators[-1])
    head = "".join(char for char in literal[:last] if char.isdigit())
    tail = "".join(char for char in literal[last + 1 :] if char.isdigit())
    if tail:
        found.add(canonical(f"{head}.{tail}"))  # the last separator is the decimal point
    return frozenset(found)


def literals(word: str) -> list[str]:
    """The number literals of a word, in order: runs of digits with single separators between digits."""
    out: list[str] = []
    current: list[str] = []
    for index, char in enumerate(word):
        if char.isdigit() and char.isascii():
            current.append(char)
        elif (
            char in _SEPARATORS
            and current
            and index + 1 < len(word)
            and word[index + 1].isdigit()
            and current[-1].isdigit()
        ):
            current.append(char)
        else:
            if current:
                out.append("".join(current))
            current = []
    if current:
        out.append("".join(current))
    return out


def groups(word: str) -> list[frozenset[str]]:
    """The numbers a word states, each as its readings; a time's minutes `:00` left out."""
    out: list[frozenset[str]] = []
    for index, literal in enumerate(literals(word)):
        values = readings(literal)
        if index > 0 and values == {"0"}:
            continue
        out.append(values)
    return out


def code(word: str) -> str:
    """A reference as a code (see the module docstring): "TKT-0099" -> "TKT99", "#48213" -> "48213"."""
    out: list[str] = []
    digits: list[str] = []
    for char in word:
        if char.isdigit() and char.isascii():
            digits.append(char)
            continue
        if digits:
            out.append("".join(digits).lstrip("0") or "0")
            digits = []
        if char.isalpha():
            out.append(char.upper())
    if digits:
        out.append("".join(digits).lstrip("0") or "0")
    return "".join(out)


def has_digit(word: str) -> bool:
    return not word.isalpha() and any(char.isdigit() for char in word)


def grouped_with(first: str, second: str) -> str | None:
    """Two words that are one number with a space for its thousands separator ("1 299,00", French and others'
    narrow space), joined; None when they aren't."""
    if not (first.isdigit() and len(first) <= 3):
        return None
    head = second[:3]
    rest = second[3:]
    if not (head.isdigit() and len(head) == 3) or (rest and not (rest[0] in ".," and rest[1:].isdigit())):
        return None
    return first + head + rest


def is_link(word: str) -> bool:
    """A URL or an email address: a place to go, not a figure or a reference of the customer's case."""
    lowered = word.lower()
    return "://" in lowered or lowered.startswith("www.") or ("@" in word and "." in word.split("@")[-1])


def letters_of(word: str) -> str:
    return "".join(char for char in word if char.isalpha())


def looks_like_code(word: str) -> bool:
    """A reference by its shape: letters and digits mixed (`A1B2C3`, `TKT-4471`) other than a number with its unit or
    an ordinal (`9am`, `3rd`, `15min`), a `#` before digits, or five digits and more with nothing around them."""
    if word.startswith("#") and has_digit(word):
        return True
    number, dash, rest = word.partition("-")
    if dash and number.isdigit() and rest.isalpha() and len(rest) >= 3:
        return False  # "5-digit", "30-day": a count that describes, not a code
    letters = letters_of(word).lower()
    if letters:
        if letters in _UNITS or letters in _ORDINALS:
            return False
        return True
    digits = [literal for literal in literals(word)]
    return len(digits) == 1 and digits[0].isdigit() and len(digits[0]) >= 5 and word.strip("()[]") == digits[0]


def twelve_hour(word: str) -> Iterator[str]:
    """A 24-hour time's hour on a 12-hour clock ("14:00" -> "2"): a source's 14:00 grounds an answer's "2 pm"."""
    start = word.find(":")
    while start != -1:
        hour = word[max(0, start - 2) : start]
        hour = hour if hour.isdigit() else hour[-1:]
        if hour.isdigit() and 12 < int(hour) < 24:
            yield str(int(hour) - 12)
        start = word.find(":", start + 1)


def plain(word: str) -> bool:
    """A number as a reference may be written: digits, a `#`, letters, dashes; no currency sign, percent or
    decimal separator (`$20`, `15%`, `12.50` are figures whatever word stands before them)."""
    for char in word:
        if char in "%" or unicodedata.category(char) == "Sc":
            return False
    return all(len(literal) == sum(ch.isdigit() for ch in literal) for literal in literals(word))


def parts(literal: str) -> list[str]:
    """A literal's numbers between its separators ("12.03.2024" -> 12, 3, 2024; "10.30" -> 10, 30)."""
    out: list[str] = []
    current: list[str] = []
    for char in literal:
        if char.isdigit():
            current.append(char)
        elif current:
            out.append(canonical("".join(current)))
            current = []
    if current:
        out.append(canonical("".join(current)))
    return out


def times(value: str, multiplier: int) -> str:
    """`value` (canonical) times a whole multiplier, canonical."""
    whole, _, fraction = value.partition(".")
    scaled = int(whole + fraction) * multiplier
    digits = str(scaled)
    if fraction:
        digits = digits.rjust(len(fraction) + 1, "0")
        digits = digits[: -len(fraction)] + "." + digits[-len(fraction) :]
    return canonical(digits)
