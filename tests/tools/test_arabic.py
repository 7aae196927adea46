"""Arabic-aware folding: two spellings a reader takes for the same word must match."""

from __future__ import annotations

import pytest

from tools.arabic import normalize_arabic, normalize_digits


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("مَدْرَسَةٌ", "مدرسه"),  # harakat and tanween removed, taa marbuta -> haa
        ("شَدَّة", "شده"),  # shadda removed
        ("رحمٰن", "رحمن"),  # superscript (dagger) alef removed
        ("مـــرحـبـا", "مرحبا"),  # tatweel removed
        ("أحمد", "احمد"),
        ("إسلام", "اسلام"),
        ("آمن", "امن"),
        ("ٱلله", "الله"),  # alef wasla
        ("مستشفى", "مستشفي"),  # alef maqsura -> yaa
        ("فاطمة", "فاطمه"),
        ("٠١٢٣٤٥٦٧٨٩", "0123456789"),  # Arabic-Indic digits
        ("۰۱۲۳۴۵۶۷۸۹", "0123456789"),  # extended (Persian) Arabic-Indic digits
        ("Order ٨٨١٢", "order 8812"),  # casefold too
        ("STRASSE Straße", "strasse strasse"),
        ("ﻻ", "لا"),  # presentation-form ligature from copied PDFs
        ("ﺃﺣﻤﺪ", "احمد"),  # presentation forms with hamza
        ("مر\u200fحبا\u200b", "مرحبا"),  # invisible bidi mark and zero-width space
    ],
)
def test_normalize_arabic(written: str, expected: str) -> None:
    assert normalize_arabic(written) == expected


def test_spelling_variants_fold_to_the_same_key() -> None:
    variants = ["إِرْجَاع الطَّلَبِيَّة", "ارجاع الطلبيه", "اِرجاع الطلبية", "إرجـــاع الطلبية"]
    assert len({normalize_arabic(v) for v in variants}) == 1
    assert normalize_arabic("طلب رقم ٨٨١٢") == normalize_arabic("طلب رقم 8812")


def test_letters_the_seed_does_not_unify_stay_distinct() -> None:
    # Hamza on waw/yaa and the letter haa itself are different letters, not spelling variants.
    assert normalize_arabic("مسؤول") == "مسؤول"
    assert normalize_arabic("سائق") == "سائق"
    assert normalize_arabic("ه") == "ه"
    assert normalize_arabic("") == ""
    assert normalize_arabic("plain text 123") == "plain text 123"


def test_normalize_digits_changes_only_digits() -> None:
    # Templating reads order numbers this way: the value sent on must keep its letters, case and diacritics.
    assert normalize_digits("طلبيّة ٨٨١٢-AB ۳") == "طلبيّة 8812-AB 3"
    assert normalize_digits("8812") == "8812"
