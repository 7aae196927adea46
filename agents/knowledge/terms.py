"""Text to search terms: the one function used when a passage is indexed and when a query is read, on both database
backends, so the two sides always agree (SPEC §6: `search_knowledge` is Arabic-aware).

`terms(text)` folds the text (tools.arabic.normalize_arabic: NFKC, diacritics and tatweel removed, alef/yaa/
taa-marbuta forms unified, Arabic-Indic digits as ASCII, casefolded; here also hamza on waw/yaa: ؤ -> و, ئ -> ي),
cuts it into words (runs of letters, runs of digits), drops stop words, and gives each word with its stems:

- English: the word and its Porter stem ("shipped" -> "shipped", "ship").
- Arabic: the word, its light stem (conjunction و/ف, the article with its prepositions وال، بال، كال، فال، لل، ال,
  one pronoun suffix and one plural/feminine suffix removed: "والشحنات" -> "شحن") and, for a word that starts with
  the prepositions ب، ل، ك، ف without the article, that stem without the letter ("لطلبك" -> "طلب"). Stems keep at
  least three letters, the length of most Arabic roots.

A word that matches in its written form also matches through its stems, so exact matches rank above matches of a
stem only. The output is for matching only, never shown.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

from tools.arabic import normalize_arabic

# Bump when what `terms` returns changes: sources indexed with an older version are indexed again.
TERMS_VERSION: Final = 1

_HAMZA_SEATS: Final = str.maketrans({"\u0624": "\u0648", "\u0626": "\u064a"})  # ؤ -> و, ئ -> ي
# Letters (any script) or digits, separately: "٣٠يوما" -> "30", "يوما"; "iphone15" -> "iphone", "15".
# linear: two disjoint classes, each taken whole
_WORD_RE: Final = re.compile(r"[^\W\d_]+|\d+")
# linear: one character
_ARABIC_RE: Final = re.compile(r"[\u0600-\u06ff]")
_MAX_WORD: Final = 40  # longer "words" are noise (hashes, base64): not indexed

ENGLISH_STOP_WORDS: Final = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between both
    but by can could did do does doing done down during each else ever few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not of off
    on once only or other our ours ourselves out over own please same she should so some such than thank thanks that
    the their theirs them themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves hi hello many
    much""".split()
)
# Folded forms (see normalize_arabic): question words, prepositions, pronouns, particles, demonstratives.
ARABIC_STOP_WORDS: Final = frozenset(
    """في من علي الي عن مع هل ما ماذا لماذا كيف متي اين كم اي ايه هذا هذه ذلك تلك هناك هنا الذي التي الذين اللذين
    او ام ثم بل لكن حتي اذا اذ ان انه انها لان كان كانت يكون تكون قد لقد لم لن لا نعم ليس غير عند عندي عندكم لدي لديكم
    انا انت انتم انتي نحن هو هي هم هن كل بعض جدا فقط ايضا يا لو مثل بين بعد قبل حول دون منذ ضمن تجاه وهل وما وكيف
    ومتي واين وكم ممكن يمكنني اريد ابغي ابي عايز بدي لو سمحت شكرا مرحبا السلام عليكم مو مش وش ايش شو ليش وين اللي
    عشان علشان يعني بس هاذا هذي""".split()
)

# Words customers and help pages use for the same thing (English spelling variants too). Each word of a group also
# gives the group's first word's term, so either wording finds the other. Kept to the shop's everyday vocabulary.
SYNONYM_GROUPS: Final = (
    "parcel package shipment",
    "standard normal regular usual",
    "delivery shipping deliver ship",
    "refund reimbursement reimburse",
    "store shop branch outlet",
    "phone mobile smartphone cellphone",
    "bag handbag purse",
    "exchange swap",
    "gift present",
    "purchase buy bought",
    "invoice receipt bill",
    "instalment installment instalments installments",
    "cancelled canceled cancelling canceling",
    "colour color",
    "jewellery jewelry",
    "programme program",
    "centre center",
    "authorisation authorization",
    "personalised personalized",
    "fridge refrigerator",
    "tv television",
    "laptop notebook",
    "courier driver",
    "warranty guarantee",
    "company corporate business",
    "price cost",
    "faulty defective broken",
    "payment pay paid",
    "send sent",
    "lose lost",
    "sell sold",
    "wear wore worn",
    "جوال هاتف موبايل تلفون",
    "حقيبه شنطه",
    "نقدا كاش كاشا نقد",
    "مبلغ فلوس",
    "استرداد استرجاع",
    "شحن توصيل",
    "استبدال تبديل",
    "فرع محل معرض",
    "تصليح اصلاح صيانه",
    "مكيف تكييف",
    "مرور سر",
    "مندوب سائق",
    "فاتوره ايصال",
    "طرد كرتون",
)


def fold(text: str) -> str:
    """normalize_arabic, and hamza on waw/yaa as the bare letter."""
    return normalize_arabic(text).translate(_HAMZA_SEATS)


# --- English: Porter's stemmer (M.F. Porter, 1980), as published ---------------------------------------------------

_VOWELS: Final = frozenset("aeiou")


def _is_consonant(word: str, i: int) -> bool:
    if word[i] in _VOWELS:
        return False
    if word[i] == "y":
        return i == 0 or not _is_consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """m in [C](VC)^m[V]."""
    kinds = ["c" if _is_consonant(stem, i) else "v" for i in range(len(stem))]
    return sum(1 for before, after in zip(kinds, kinds[1:], strict=False) if before == "v" and after == "c")


def _has_vowel(stem: str) -> bool:
    return any(not _is_consonant(stem, i) for i in range(len(stem)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _is_consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    return (
        len(word) >= 3
        and _is_consonant(word, len(word) - 3)
        and not _is_consonant(word, len(word) - 2)
        and _is_consonant(word, len(word) - 1)
        and word[-1] not in "wxy"
    )


_STEP2: Final = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
)
_STEP3: Final = (
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
)
_STEP4: Final = "al ance ence er ic able ible ant ement ment ent ion ou ism ate iti ous ive ize".split()


def _replace_longest(word: str, rules: tuple[tuple[str, str], ...], min_measure: int) -> str:
    """The longest suffix of `rules` that ends the word decides; it is replaced when the stem's measure allows."""
    best = max((rule for rule in rules if word.endswith(rule[0])), key=lambda rule: len(rule[0]), default=None)
    if best is None:
        return word
    stem = word[: -len(best[0])]
    return stem + best[1] if _measure(stem) > min_measure else word


@lru_cache(maxsize=50_000)
def porter_stem(word: str) -> str:
    if len(word) <= 2:
        return word
    # Step 1a
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    # Step 1b
    again = False
    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:
            word = word[:-1]
    elif word.endswith("ed") and _has_vowel(word[:-2]):
        word, again = word[:-2], True
    elif word.endswith("ing") and _has_vowel(word[:-3]):
        word, again = word[:-3], True
    if again:
        if word.endswith(("at", "bl", "iz")):
            word += "e"
        elif _double_consonant(word) and word[-1] not in "lsz":
            word = word[:-1]
        elif _measure(word) == 1 and _cvc(word):
            word += "e"
    # Step 1c
    if word.endswith("y") and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    word = _replace_longest(word, _STEP2, 0)
    word = _replace_longest(word, _STEP3, 0)
    # Step 4
    suffix = max((s for s in _STEP4 if word.endswith(s)), key=len, default=None)
    if suffix is not None:
        stem = word[: -len(suffix)]
        if _measure(stem) > 1 and (suffix != "ion" or stem.endswith(("s", "t"))):
            word = stem
    # Step 5
    if word.endswith("e"):
        stem = word[:-1]
        if _measure(stem) > 1 or (_measure(stem) == 1 and not _cvc(stem)):
            word = stem
    if word.endswith("ll") and _measure(word) > 1:
        word = word[:-1]
    return word


# --- Arabic: a light stemmer (in the manner of Larkey's light10) --------------------------------------------------

_ARTICLES: Final = ("وبال", "وكال", "وال", "فال", "بال", "كال", "لل", "ال")
_CONJUNCTIONS: Final = ("و", "ف")
_PREPOSITIONS: Final = ("ب", "ل", "ك", "ف")
_PRONOUN_SUFFIXES: Final = ("هما", "كما", "هم", "هن", "كم", "نا", "ها", "ك", "ه", "ي")
_FORM_SUFFIXES: Final = ("ات", "ون", "ين", "ان", "وا", "تم", "يه", "ه", "ي", "ا", "ت")
_MIN_STEM: Final = 3


def _strip_suffixes(word: str) -> str:
    for suffix in _PRONOUN_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
            word = word[: -len(suffix)]
            if word.endswith("ت") and not word.endswith("ات"):  # taa marbuta before a pronoun: بطاقتي -> بطاقه
                word = word[:-1] + "ه"
            break
    for suffix in _FORM_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
            return word[: -len(suffix)]
    return word


def _root(stem: str) -> str | None:
    """The three root letters of a stem of a common verb or noun pattern, so a question's verb finds the document's
    noun: ادفع/دفع, احول/تحويل, ارجع/ارجاع/استرجاع, عطر/عطور, فتح/مفتوح. None for other shapes."""
    n = len(stem)
    if n == 4 and stem[0] in "ايتن":  # أفعل يفعل تفعل نفعل: the imperfect verb
        return stem[1:]
    if n == 4 and stem[2] == "و":  # فعول: a broken plural
        return stem[0] + stem[1] + stem[3]
    if n == 5 and ((stem[0] == "ت" and stem[3] == "ي") or (stem[0] == "ا" and stem[3] == "ا")):  # تفعيل إفعال أفعال
        return stem[1] + stem[2] + stem[4]
    if n == 5 and stem[0] == "م" and stem[3] == "و":  # مفعول
        return stem[1] + stem[2] + stem[4]
    if n == 6 and stem.startswith("است"):  # استفعل
        return stem[3:]
    if n == 7 and stem.startswith("است") and stem[5] == "ا":  # استفعال
        return stem[3] + stem[4] + stem[6]
    return None


@lru_cache(maxsize=50_000)
def arabic_stems(word: str) -> tuple[str, ...]:
    """The light stem of a folded Arabic word and, after a bare preposition, the stem without it (may be empty)."""
    out: list[str] = []
    rest = word
    for article in _ARTICLES:
        if rest.startswith(article) and len(rest) - len(article) >= 2:
            out.append(_strip_suffixes(rest[len(article) :]))
            return tuple(out)
    if rest.startswith(_CONJUNCTIONS) and len(rest) > 3:
        rest = rest[1:]
        for article in _ARTICLES[3:]:
            if rest.startswith(article) and len(rest) - len(article) >= 2:
                return (_strip_suffixes(rest[len(article) :]),)
    stem = _strip_suffixes(rest)
    out.append(stem)
    if stem.startswith(_PREPOSITIONS) and len(stem) - 1 >= _MIN_STEM:
        out.append(stem[1:])
    if rest != word:  # و/ف was taken off: the word may also begin with و/ف itself (وصول, فاتوره)
        out.append(_strip_suffixes(word))
    return tuple(out)


@lru_cache(maxsize=1)
def _synonyms() -> dict[str, str]:
    """Each term of a group's words -> the term of the group's first word."""
    out: dict[str, str] = {}
    for group in SYNONYM_GROUPS:
        words = [fold(word) for word in group.split()]
        canonical = _forms(words[0])[-1]
        for word in words[1:]:
            for term in _forms(word):
                out.setdefault(term, canonical)
    return out


@lru_cache(maxsize=100_000)
def _word_terms(word: str) -> tuple[str, ...]:
    found = _forms(word)
    synonyms = _synonyms()
    for term in list(found):
        canonical = synonyms.get(term)
        if canonical is not None and canonical not in found:
            found.append(canonical)
    return tuple(found)


def _forms(word: str) -> list[str]:
    if len(word) > _MAX_WORD:  # a 5,000-digit "number" too: PostgreSQL refuses a term over 2 KB in a tsvector
        return []
    if word.isdigit():
        return [word.lstrip("0") or "0"]
    if len(word) < 2:
        return []
    if _ARABIC_RE.search(word):
        if word in ARABIC_STOP_WORDS or (word[0] in "وف" and word[1:] in ARABIC_STOP_WORDS):
            return []
        found = [word]
        stems = arabic_stems(word)
        roots = [root for root in map(_root, stems[:1]) if root]
        for stem in stems:
            if stem not in found and stem not in ARABIC_STOP_WORDS and len(stem) >= 2:
                found.append(stem)
        # A root is not a word of its own: حول (to turn, from تحويل) is kept though the word حول is a stop word.
        found += [root for root in roots if root not in found]
        return found
    if word in ENGLISH_STOP_WORDS:
        return []
    stem = porter_stem(word) if word.isascii() else word
    return [word] if stem == word or len(stem) < 2 else [word, stem]


def terms(text: str) -> list[str]:
    """Every search term of `text`, in order, repeated as often as it occurs (term frequencies count)."""
    out: list[str] = []
    for word in _WORD_RE.findall(fold(text)):
        out.extend(_word_terms(word))
    return out


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, in order of first appearance (the same function as for indexing)."""
    return list(dict.fromkeys(terms(text)))
