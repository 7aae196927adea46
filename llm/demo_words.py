"""How the demo model (llm/demo.py) reads the customer's words: their content words (Arabic-folded, stopwords
dropped, lightly stemmed), which tool picking, argument filling and the replies share, and whether they ask for a
person of the team, in English or Arabic."""

from __future__ import annotations

import re
from typing import Final

from tools.arabic import normalize_arabic

# The user's words are anyone's: every expression on them is linear or runs with a time limit.
# linear: one character class, repeated; a failed start costs one character.
WORD_RE = re.compile(r"\w+", re.UNICODE)

_STOPWORDS_RAW = """
a an the and or but if of to in on at by for from with about into over under as is are was were be been being am
i me my mine we us our you your yours he she it its they them their this that these those there here what which who
whom whose when where why how can could would should will shall may might must do does did done have has had having
not no yes please pls thanks thank hi hello hey ok okay so just also too very really some any all get got want wanted
need needs like know tell let help
في من الى إلى على عن ان أن إن انا أنا انت أنت هو هي نحن هم هل ما ماذا لماذا كيف متى اين أين هذا هذه ذلك تلك و او أو
يا لو مع لي لك عند كان كانت ممكن ابي أبي اريد أريد بدي شكرا مرحبا السلام عليكم لا نعم
"""
_STOPWORDS = frozenset(normalize_arabic(w) for w in _STOPWORDS_RAW.split())


def _stem(word: str) -> str:
    """A very light stem, applied to both sides alike: damaged ~ damage, orders ~ order, الطلب ~ طلب."""
    if word.startswith("ال") and len(word) > 4:
        return word[2:]
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def content_words(text: str) -> list[str]:
    """Content words of `text`: Arabic-folded, split, stopwords and 1-letter tokens dropped, lightly stemmed."""
    out: list[str] = []
    for token in WORD_RE.findall(normalize_arabic(text).replace("_", " ")):
        if len(token) < 2 or token in _STOPWORDS or token.isdigit():
            continue
        out.append(_stem(token))
    return out


# --- asking for a person ----------------------------------------------------------------------------------------

# How people ask for a person, read on words (`_words_and_forms`), never with an expression: the user's words are
# anyone's, and each of them is read a bounded number of times. Written as people write them; folded at import as
# the words are (أ/إ/آ are ا, ة is ه, case ignored).
# Enough on their own: said to a bot only to get past it.
_ASKS_ALONE = """
human | humans | representative | representatives | real person | real people | live agent | live person
customer service | customer support | customer care | member of staff | staff member | team member
إنسان | بشري | بشر | موظف | موظفة | موظفين | موظفا | خدمة العملاء | فريق الدعم | ممثل خدمة
التحدث مع | أتحدث مع | الحديث مع | أتكلم مع | التكلم مع | مع أحد | أكلم أحد | أكلم حد | كلمني أحد | كلمني حد
"""
# A person, when a request word is near ("I want to talk to a person"; "price per person" is no request). Not
# "people" ("seats for 4 people"), أحد (الأحد is Sunday) nor حد (الحد is a limit): they are asked for in phrases above.
_PERSON_WORDS = """
person | someone | somebody | anyone | anybody | agent | agents | staff | operator | employee | manager
supervisor | rep | advisor | adviser | colleague
شخص | شخصا | أشخاص | مسؤول | مسئول | مدير | ممثل
"""
_REQUEST_WORDS = """
talk | talking | speak | speaking | chat | chatting | connect | transfer | reach | contact | want | wanna | need | get
give | ask | let | like | prefer | request | escalate | put | pass | hand | call | see | help | please | pls | plz
أريد | أبي | أبغى | أبغا | بدي | ودي | أود | ممكن | أحتاج | التحدث | أتحدث | تحدث | الحديث | أكلم | كلم | كلمني
تكلم | أتكلم | التكلم | حولني | حولوني | تحويل | حول | وصلني | وصلوني | التواصل | أتواصل | تواصل | مع | أطلب | فضلك
سمحت
"""
# "per person", "each person", "لكل شخص": a count, not a person asked for.
_COUNTING_WORDS = "per | each | every | كل"
_REQUEST_REACH = 4  # words between a request word and the person it asks for, either side
_SHORT_MESSAGE = 2  # "agent", "a person", "شخص": a message this short asks for what it names


def _folded(text: str) -> list[tuple[str, ...]]:
    phrases = (phrase.split() for phrase in text.replace("\n", "|").split("|"))
    return [tuple(normalize_arabic(word) for word in phrase) for phrase in phrases if phrase]


def _by_first_word(phrases: list[tuple[str, ...]]) -> dict[str, tuple[tuple[str, ...], ...]]:
    grouped: dict[str, list[tuple[str, ...]]] = {}
    for phrase in phrases:
        grouped.setdefault(phrase[0], []).append(phrase)
    return {first: tuple(group) for first, group in grouped.items()}


_ALONE: Final = _by_first_word(_folded(_ASKS_ALONE))
_ALONE_FIRST_WORDS: Final = frozenset(_ALONE)
_PERSON: Final = frozenset(word for (word,) in _folded(_PERSON_WORDS))
_REQUEST: Final = frozenset(word for (word,) in _folded(_REQUEST_WORDS))
_COUNTING: Final = frozenset(word for (word,) in _folded(_COUNTING_WORDS))


def _forms(word: str) -> frozenset[str]:
    """A folded word and, in Arabic, the word without the particles written onto it: وبالموظف is also بالموظف,
    الموظف and موظف; للموظف is also موظف."""
    forms = {word}
    if word[:1] in ("و", "ف") and len(word) > 3:
        forms.add(word[1:])
    for form in list(forms):
        if form[:1] in ("ب", "ل", "ك") and len(form) > 3:
            forms.add(form[1:])
    for form in list(forms):
        if form[:2] in ("ال", "لل") and len(form) > 4:
            forms.add(form[2:])
    return frozenset(forms)


def _words_and_forms(text: str) -> list[frozenset[str]]:
    # linear: WORD_RE is one character class, repeated.
    return [_forms(word) for word in WORD_RE.findall(normalize_arabic(text))]


def _starts_phrase(words: list[frozenset[str]], at: int, phrase: tuple[str, ...]) -> bool:
    return at + len(phrase) <= len(words) and all(word in words[at + i] for i, word in enumerate(phrase))


def demo_asks_for_a_person(text: str) -> bool:
    """Whether `text` asks for a person of the team, in English or Arabic: "I want to talk to a person", "a real
    human", "can someone help", "أريد التحدث مع موظف", "خدمة العملاء". Linear in the words of `text`."""
    words = _words_and_forms(text)
    for at, forms in enumerate(words):
        for first in forms & _ALONE_FIRST_WORDS:
            if any(_starts_phrase(words, at, phrase) for phrase in _ALONE[first]):
                return True
        if not forms & _PERSON or (at and words[at - 1] & _COUNTING):
            continue
        if len(words) <= _SHORT_MESSAGE:
            return True
        near = range(max(0, at - _REQUEST_REACH), min(len(words), at + _REQUEST_REACH + 1))
        if any(words[i] & _REQUEST for i in near if i != at):
            return True
    return False
