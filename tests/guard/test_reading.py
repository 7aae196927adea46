"""The answer read as the customer sees it (guard/reading.py): Markdown rendered to its words, line breaks inside a
sentence as spaces, format characters and tatweel dropped, lookalikes folded — the same for the whole answer and
for the stream."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from guard.lexicon import INDEX
from guard.reading import fold, rendered, sentences


def read(text: str) -> list[str]:
    return [sentence.text for sentence in sentences(text, INDEX.abbreviations)]


@pytest.mark.parametrize(
    ("markdown", "seen"),
    [
        ("Your ticket number is **48213**.", ["Your ticket number is 48213."]),
        ("I have __cancelled__ your order.", ["I have cancelled your order."]),
        ("ticket ID `48213`", ["ticket ID 48213"]),
        ("_TKT-1234_", ["TKT-1234"]),
        ("~~old~~ new", ["old new"]),
        ("See [your order 8812](https://shop.example/o/8812).", ["See your order 8812."]),
        ("![the label](https://x.example/a.png) attached", ["the label attached"]),
        ("<b>48213</b> is yours<br>Thanks", ["48213 is yours Thanks"]),
        ("&#52;&#56;&#50;&#49;&#51; it is", ["48213 it is"]),
        ("snake_case_name stays", ["snake_case_name stays"]),
        ("\\*not emphasis\\*", ["not emphasis"]),
    ],
)
def test_inline_markdown_is_read_as_its_words(markdown, seen):
    assert read(markdown) == seen


def test_blocks_are_sentences_and_their_markers_are_not_words():
    answer = (
        "# Your order\n\nHere it is:\n- **Ticket:** 48213\n- Status: open\n1. First step\n2) Second\n"
        "> quoted line\n---\n| Field | Value |\n|---|:---:|\n| Ticket | 48213 |\n```\ncode line\n```\nEnd."
    )
    assert read(answer) == [
        "Your order",
        "Here it is:",
        "Ticket: 48213",
        "Status: open",
        "First step",
        "Second",
        "quoted line",
        "Field Value",
        "Ticket 48213",
        "code line",
        "End.",
    ]


@pytest.mark.parametrize("brk", ["\n", "\r\n", "\u2028", "\u2029", " \n  "])
def test_a_single_line_break_continues_the_sentence(brk):
    assert read(f"I've{brk}cancelled your order and refunded you.") == ["I've cancelled your order and refunded you."]


def test_a_blank_line_ends_the_sentence():
    assert read("I've\n\ncancelled it") == ["I've", "cancelled it"]


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("Your ticket no. 4471 is open.", ["Your ticket no. 4471 is open."]),
        ("Call Dr. Smith, e.g. tomorrow. Bye!", ["Call Dr. Smith, e.g. tomorrow.", "Bye!"]),
        ("It costs 12.50 today. Really?", ["It costs 12.50 today.", "Really?"]),
        ("هل تم الإلغاء؟ نعم.", ["هل تم الالغاء؟", "نعم."]),
        ("आपका ऑर्डर रद्द हो गया है। धन्यवाद", ["आपका ऑर्डर रद्द हो गया है।", "धन्यवाद"]),
        ("آپ کا آرڈر منسوخ ہو گیا ہے۔ شکریہ", ["اپ كا ارڈر منسوخ هو گيا هے۔", "شكريه"]),
        ('He said "done." Then left.', ['He said "done."', "Then left."]),
    ],
)
def test_sentences_end_where_a_reader_ends_them(text, seen):
    assert read(text) == seen


def test_tatweel_and_arabic_letter_forms_fold():
    assert fold("تـم") == "تم"
    assert fold("إلغاء") == fold("الغاء") == "الغاء"
    assert fold("التـذكرة") == "التذكره"


def test_every_dash_reads_as_a_hyphen():
    dashes = [chr(cp) for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Pd"]
    dashes += ["\u2212", "\u207b", "\u208b", "\u2796", "\u02d7", "\u2043"]
    assert {c: fold("x" + c + "1") for c in dashes} == dict.fromkeys(dashes, "x-1")


def test_format_characters_are_dropped():
    every_cf = [chr(cp) for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Cf"]
    assert len(every_cf) > 150
    assert {c: fold("T" + c + "KT") for c in every_cf} == dict.fromkeys(every_cf, "TKT")


@pytest.mark.parametrize(
    "spelled",
    ["\uff34\uff2b\uff34", "\u0422\u041a\u0422", "\u03a4\u039a\u03a4", "\U0001d413\U0001d40a\U0001d413", "T\u0301KT"],
    ids=["fullwidth", "cyrillic", "greek", "math-bold", "combining-accent"],
)
def test_lookalike_letters_read_as_latin(spelled):
    assert fold(spelled).replace("\u0301", "") == "TKT"


def test_every_decimal_digit_reads_as_ascii():
    assert fold("\u0664\u0665\u0666") == fold("\u06f4\u06f5\u06f6") == fold("\u096a\u096b\u096c") == "456"
    assert fold("\uff14\uff15\uff16") == "456"


def test_devanagari_keeps_its_vowel_signs_and_latin_its_accents():
    assert fold("रद्द") == "रद्द" and fold("annulée") == "annulée"


def test_rendered_shows_a_sentence_a_line():
    assert rendered("**Hi** there.\nYour ticket is `TKT-4`. Bye") == "Hi there.\nYour ticket is TKT-4.\nBye"
