"""`demo`: a small deterministic offline model for the embedded default and demos (`bin/run`, the chat widget). It
hands the conversation to the team when the customer asks for a person (in English or Arabic), else picks a tool by
word overlap with the tools' names and descriptions, fills arguments from the schema, and says it is a demo.

It answers a tool result as a person would, in the customer's language: plain sentences of what the result says,
never its JSON, K-Agent's ids or the notes a result carries for the model ("Tell the customer…"); a failure as a
plain apology, without its code. What it says is what the truthfulness guard (guard/) verifies: a handoff
only after the handoff built-in made one, a ticket's number only as the ticket's receipt gives it, every failure
with an admission; an answer the guard pushes back anyway is followed by a plain "I can't confirm that"."""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, Final

import regex

from llm.transport import json_object
from llm.types import Message, ModelRequest, ModelResponse, ToolCallRequest, ToolDefinition, Usage
from tools.arabic import normalize_arabic, normalize_digits
from tools.builtins import CREATE_TICKET, FLAG_CONVERSATION, SEARCH_KNOWLEDGE, TRANSFER_TO_HUMAN, Receipt

DEMO_PREFIX = "(Demo model)"
DEMO_MODEL_NAME = "demo"
DEMO_THRESHOLD = 2  # a word in a tool's name counts 2, in its description 1: one name word or two description words
_NAME_WEIGHT = 2
# The user's words are anyone's: every expression on them is linear or runs with a time limit.
# linear: one character class, repeated; a failed start costs one character.
_WORD_RE = re.compile(r"\w+", re.UNICODE)
# linear: a start is a digit or "-", the digits are taken greedily and the optional fraction can't overlap them.
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")
# linear: one character class, repeated.
_TOKEN_SPLIT_RE = re.compile(r"[\s,;:!?()\"']+")
_EMAIL_STOPS = frozenset("@<>()\"'")
_ID_HINTS = ("number", "id", "code", "reference", "ref", "tracking", "رقم")

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


def _words(text: str) -> list[str]:
    """Content words of `text`: Arabic-folded, split, stopwords and 1-letter tokens dropped, lightly stemmed."""
    out: list[str] = []
    for token in _WORD_RE.findall(normalize_arabic(text).replace("_", " ")):
        if len(token) < 2 or token in _STOPWORDS or token.isdigit():
            continue
        out.append(_stem(token))
    return out


def _tool_score(user_words: set[str], tool: ToolDefinition) -> int:
    name_words = set(_words(tool.name.replace("_", " ")))
    description_words = set(_words(tool.description))
    return sum(_NAME_WEIGHT if word in name_words else 1 if word in description_words else 0 for word in user_words)


def demo_pick_tool(user_text: str, tools: Sequence[ToolDefinition]) -> ToolDefinition | None:
    """The tool whose name and description share the most words with `user_text`, if it reaches the threshold."""
    user_words = set(_words(user_text))
    best: tuple[int, str] | None = None
    chosen: ToolDefinition | None = None
    for tool in tools:
        score = _tool_score(user_words, tool)
        # Ties go to the alphabetically first name, so the choice never depends on the order tools were given in.
        if score >= DEMO_THRESHOLD and (best is None or (-score, tool.name) < best):
            best, chosen = (-score, tool.name), tool
    return chosen


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
    # linear: _WORD_RE is one character class, repeated.
    return [_forms(word) for word in _WORD_RE.findall(normalize_arabic(text))]


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


def _handoff_tool(user_text: str, tools: Sequence[ToolDefinition]) -> ToolDefinition | None:
    """The handoff built-in when the customer asks for a person and the agent has it: before any other tool (a
    starter rule: "When the customer asks for a person, hand over straight away")."""
    tool = next((t for t in tools if t.name == TRANSFER_TO_HUMAN.name), None)
    return tool if tool is not None and demo_asks_for_a_person(user_text) else None


def _numbers(text: str) -> list[str]:
    return _NUMBER_RE.findall(normalize_arabic(text))


def _find_email(text: str) -> str | None:
    """The first `local@domain.tld` in `text`, as `[^\\s@<>()"']+@[^\\s@<>()"']+\\.[a-zA-Z]{2,}` would find it, in one
    pass (that expression backtracks quadratically on a long run without an @: 3 s on 20 kB). linear: each character
    is read once looking left of an @ and once looking right of it, and those stretches don't overlap."""

    def local(char: str) -> bool:
        return not char.isspace() and char not in _EMAIL_STOPS

    at = text.find("@")
    while at != -1:
        start = at
        while start > 0 and local(text[start - 1]):
            start -= 1
        end = at + 1
        while end < len(text) and local(text[end]):
            end += 1
        domain = text[at + 1 : end]
        # The last "." with at least one character before it and two or more ASCII letters after it.
        dot = domain.rfind(".")
        while start < at and dot > 0:
            letters = 0
            while dot + 1 + letters < len(domain) and domain[dot + 1 + letters] in _ASCII_LETTERS:
                letters += 1
            if letters >= 2:
                return text[start : at + 1 + dot + 1 + letters]
            dot = domain.rfind(".", 0, dot)
        at = text.find("@", at + 1)
    return None


_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

# A tenant's schema pattern is run against the end user's words: on the regex module with a time limit shared by all
# the tokens of one message (Python's re has none). A pattern that doesn't answer in time, or doesn't compile, is not
# used: the id-like token fallback still applies.
_MAX_PATTERN_TOKENS = 50
_MAX_PATTERN_TOKEN_LENGTH = 40
PATTERN_BUDGET_S = 0.2


def _pattern_token(pattern: Any, tokens: list[str]) -> str | None:
    """The first token the tenant's `pattern` matches in full, within the budget."""
    if not isinstance(pattern, str) or len(pattern) > 200:
        return None
    deadline = time.monotonic() + PATTERN_BUDGET_S
    for token in tokens[:_MAX_PATTERN_TOKENS]:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if len(token) > _MAX_PATTERN_TOKEN_LENGTH:
            continue
        try:
            if regex.fullmatch(pattern, token, timeout=left):
                return token
        except (TimeoutError, regex.error):
            return None
    return None


def _string_value(name: str, schema: dict[str, Any], text: str, *, required: bool) -> str | None:
    """A string argument from the user's words: a token matching the schema's pattern, an email for an email
    field, or (required fields only, where a guess beats nothing) an id-like token for a number/id/code field."""
    # Digits made ASCII (٨٨١٢ is 8812) but case kept, so a pattern like ^TKT-[0-9]+$ still matches.
    tokens = [t.strip(".#") for t in _TOKEN_SPLIT_RE.split(normalize_digits(text)) if t.strip(".#")]
    matched = _pattern_token(schema.get("pattern"), tokens)
    if matched is not None:
        return matched
    hint_words = _WORD_RE.findall(f"{name} {schema.get('description', '')}".lower().replace("_", " "))
    if schema.get("format") == "email" or "email" in hint_words:
        email = _find_email(text)
        if email is not None:
            return email
    if required and any(h in hint_words for h in _ID_HINTS):
        for token in tokens:
            if any(ch.isdigit() for ch in token):
                return token
    return None


def _enum_value(schema: dict[str, Any], user_words: set[str]) -> tuple[Any, bool]:
    """(the enum value whose words appear in the message, True), else (the first value, False)."""
    values = schema.get("enum") or []
    for value in values:
        words = set(_words(str(value).replace("_", " ")))
        if words and words <= user_words:
            return value, True
    return (values[0] if values else None), False


def demo_arguments(tool: ToolDefinition, user_text: str) -> dict[str, Any]:
    """Arguments for `tool` from the user's words, by its JSON Schema; optional ones only when clearly given."""
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    required = set(tool.parameters.get("required") or []) if isinstance(tool.parameters, dict) else set()
    user_words = set(_words(user_text))
    numbers = _numbers(user_text)
    message = " ".join(user_text.split())
    args: dict[str, Any] = {}
    for name, schema in sorted((properties or {}).items()):
        if not isinstance(schema, dict):
            continue
        is_required = name in required
        kind = schema.get("type")
        if "enum" in schema:
            value, matched = _enum_value(schema, user_words)
            if matched or is_required:
                args[name] = value
        elif kind == "string":
            found = _string_value(name, schema, user_text, required=is_required)
            if found is not None:
                args[name] = found
            elif is_required:
                limit = schema.get("maxLength")
                args[name] = message[:limit] if isinstance(limit, int) else message
        elif kind in ("integer", "number"):
            if numbers:
                number = float(numbers[0])
                args[name] = int(number) if kind == "integer" else number
            elif is_required:
                args[name] = schema.get("minimum", 1)
        elif is_required:
            args[name] = {"boolean": False, "array": [], "object": {}}.get(str(kind), "")
    return args


# --- answering from tool results --------------------------------------------------------------------------------

# What the customer reads, in their language (Arabic when they write more Arabic than Latin letters). Each is a
# plain sentence a person would say; none names a tool, a code or an id. The claims in them are the ones the
# truthfulness guard (guard/) verifies against what the call made: the handoff and the ticket's number come
# from the call's receipt, and every failure is said with an admission ("couldn't"), which the guard accepts as it is.
_SAY: Final[dict[str, dict[str, str]]] = {
    "en": {
        "handoff": "I've passed this to a person from the team; they'll continue here.",
        "ticket": "I've opened ticket {number} for you, and the team will follow up on it. Please keep this number.",
        "ticket_unnumbered": "I've opened a ticket for you, and the team will follow up on it.",
        "ticket_already_open": "You already have an open ticket, {number}, and the team is on it, so I didn't open "
        "another one.",
        "ticket_already_open_unnumbered": "You already have an open ticket and the team is on it, so I didn't open "
        "another one.",
        "flagged": "I've made a note of this for the team to look at.",
        "found": "Here's what I found: {found}",
        "found_first": "I found {count} results. The first one: {found}",
        "nothing_found": "I checked, but I couldn't find anything for that.",
        "no_details": "I checked, but there are no details I can share.",
        "nothing_known": "I'm sorry, I don't have information about that.",
        "simulated": "This is a test, so nothing was really sent or changed.",
        "closed": "I'm sorry, the team isn't available right now, so I couldn't pass this on.",
        "sign_in": "I'm sorry, I can't do that until you sign in.",
        "limit": "I'm sorry, I can't do more of that right now. Please try again later.",
        "more_details": "I'm sorry, I couldn't do that with what I have. Could you tell me a bit more?",
        "not_now": "I'm sorry, I can't do that here at the moment.",
        "handoff_failed": "I'm sorry, I couldn't pass this to the team just now.",
        "ticket_failed": "I'm sorry, I couldn't open a ticket just now.",
        "failed": "I'm sorry, that didn't work just now.",
        "unreadable": "I'm sorry, I couldn't read the answer I got.",
        "unconfirmed": "I'm sorry, I can't confirm that right now.",
        "yes": "yes",
        "no": "no",
    },
    "ar": {
        "handoff": "حوّلت محادثتك إلى شخص من الفريق، وسيكمل معك هنا.",
        "ticket": "فتحت لك التذكرة {number}، وسيتابعها الفريق. احتفظ بهذا الرقم من فضلك.",
        "ticket_unnumbered": "فتحت لك تذكرة، وسيتابعها الفريق.",
        "ticket_already_open": "لديك تذكرة مفتوحة بالفعل، {number}، والفريق يتابعها، لذلك لم أفتح تذكرة أخرى.",
        "ticket_already_open_unnumbered": "لديك تذكرة مفتوحة بالفعل والفريق يتابعها، لذلك لم أفتح تذكرة أخرى.",
        "flagged": "سجّلت ملاحظة ليطّلع عليها الفريق.",
        "found": "هذا ما وجدته: {found}",
        "found_first": "وجدت {count} نتائج. أولها: {found}",
        "nothing_found": "بحثت، لكن لم أتمكن من إيجاد شيء عن ذلك.",
        "no_details": "بحثت، لكن لا توجد تفاصيل يمكنني مشاركتها.",
        "nothing_known": "عذرًا، ليست لدي معلومات عن ذلك.",
        "simulated": "هذه تجربة، لذلك لم يُرسل شيء ولم يتغير شيء فعلًا.",
        "closed": "عذرًا، الفريق غير متاح الآن، لذلك لم أتمكن من تحويل المحادثة.",
        "sign_in": "عذرًا، لا أستطيع فعل ذلك قبل أن تسجّل الدخول.",
        "limit": "عذرًا، لا أستطيع فعل المزيد من ذلك الآن. حاول مرة أخرى لاحقًا.",
        "more_details": "عذرًا، لم أتمكن من ذلك بما لدي. هل يمكنك أن تخبرني بالمزيد؟",
        "not_now": "عذرًا، لا أستطيع فعل ذلك هنا الآن.",
        "handoff_failed": "عذرًا، لم أتمكن من تحويل المحادثة إلى الفريق الآن.",
        "ticket_failed": "عذرًا، لم أتمكن من فتح تذكرة الآن.",
        "failed": "عذرًا، لم أتمكن من ذلك الآن.",
        "unreadable": "عذرًا، لم أتمكن من قراءة الرد الذي وصلني.",
        "unconfirmed": "عذرًا، لا أستطيع تأكيد ذلك الآن.",
        "yes": "نعم",
        "no": "لا",
    },
}
# A refusal's code -> what to say (the refusal's guidance is for the model: it is never repeated).
_FAILURES: Final[dict[str, str]] = {
    "outside_business_hours": "closed",
    "verified_user_required": "sign_in",
    "rate_limited": "limit",
    "invalid_arguments": "more_details",
    "not_available": "not_now",
}
# What a result holds for the model, not the customer: its notes, its markers and the data notice.
_NOTES: Final = frozenset({"message", "notice", "guidance", "omitted_note", "rows_omitted", "results_omitted"})
_MARKERS: Final = frozenset({"ok", "simulated", "tool"})
# K-Agent's own ids (kagent/ids.py: `hof_01m9…`; the demo's call ids `call_demo_…`): for the team and the logs.
_ID_PREFIXES: Final = frozenset("agt call eu evt hof key ks msg org proj run sec ses step tkt tool ver we whd".split())
_MAX_FACTS = 4
_MAX_VALUE_CHARS = 80
_MAX_SENTENCE_CHARS = 300
_SENTENCE_ENDS = ".!?؟۔…"


def _language(text: str) -> str:
    arabic = sum(1 for char in text if "\u0600" <= char <= "\u06ff")
    latin = sum(1 for char in text if char.isascii() and char.isalpha())
    return "ar" if arabic > latin else "en"


def _say(language: str, what: str, **fields: object) -> str:
    return _SAY[language][what].format(**fields)


def _internal_id(text: str) -> bool:
    for token in text.split():
        head, underscore, tail = token.partition("_")
        if underscore and head.lower() in _ID_PREFIXES and any(char.isdigit() for char in tail):
            return True
    return False


def _shortened(text: str, limit: int) -> str:
    """`text` with its whitespace squeezed, cut at a word's end when longer than `limit` (marked with …)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip(" ,;:-") + "…"


def _ended(sentence: str) -> str:
    return sentence if sentence[-1:] in _SENTENCE_ENDS else sentence + "."


def _ticket_code(text: str) -> str | None:
    """The first ticket number (`TKT-12`) among the words of `text`."""
    for token in text.split():
        token = token.strip(".,;:!?()[]\"'،")
        digits = token[4:]
        if token.startswith("TKT-") and digits.isascii() and digits.isdigit():
            return token
    return None


def _read_result(content: str) -> Any:
    """A tool result as the engine shows it: JSON, after a line of banner when the call failed."""
    for text in (content, content.partition("\n")[2]):
        try:
            return json.loads(text)
        except ValueError:
            continue
    return None


def _spoken(value: Any, language: str) -> str | None:
    """A scalar as words; None for what a customer shouldn't read (JSON text, an id, nothing)."""
    if isinstance(value, bool):
        return _say(language, "yes" if value else "no")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:g}" if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    text = _shortened(value, _MAX_VALUE_CHARS).rstrip(".!?;:, ")
    if not text or "{" in text or "}" in text or _internal_id(text):
        return None
    return text


def _label(key: Any) -> str | None:
    """A key as words ("eta_date" is "eta date"); `data`/`result` wrappers add none; None for a key not to show."""
    text = " ".join(str(key).replace("_", " ").replace(".", " ").split())
    if text in ("data", "result"):
        return ""
    if len(text) > 40 or "{" in text or "}" in text or _internal_id(text):
        return None
    return text


def _facts(value: Any, language: str) -> list[str]:
    """The first few scalar fields of a result as "label value", two objects deep at most; lists are skipped."""
    facts: list[str] = []
    pending: deque[tuple[Any, tuple[str, ...]]] = deque([(value, ())])
    while pending and len(facts) < _MAX_FACTS:
        node, path = pending.popleft()
        if isinstance(node, dict):
            if len(path) > 2:
                continue
            for key, inner in node.items():
                label = _label(key)
                if key in _NOTES or (not path and key in _MARKERS) or label is None:
                    continue
                pending.append((inner, (*path, label)))
        elif not isinstance(node, list) and (spoken := _spoken(node, language)) is not None:
            label = " ".join(part for part in path if part)
            facts.append(f"{label} {spoken}" if label else spoken)
    return facts


def _unwrapped(value: Any) -> Any:
    """An app's output the engine wrote as JSON text (tools/shaping.py `clean_value`), as the value it was."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _generic_reply(result: Any, language: str) -> str:
    """An HTTP tool's rows, an app's output or any other result: its simple fields, in words."""
    data = result.get("data", result) if isinstance(result, dict) else result
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        rows = data["rows"]
        if not rows:
            return _say(language, "nothing_found")
        facts = _facts(rows[0], language)
        if facts and len(rows) > 1:
            return _say(language, "found_first", count=len(rows), found=_ended(", ".join(facts)))
    elif isinstance(data, dict) and "output" in data:
        facts = _facts(_unwrapped(data["output"]), language)
    else:
        facts = _facts(data, language)
    return _say(language, "found", found=_ended(", ".join(facts))) if facts else _say(language, "no_details")


def _sentences(text: str) -> Iterable[str]:
    """The sentences of a passage: ending on .!?؟۔… before whitespace or the end, or on a line break."""
    start = 0
    for index, char in enumerate(text):
        if char == "\n" or (char in _SENTENCE_ENDS and (index + 1 == len(text) or text[index + 1].isspace())):
            yield text[start : index + 1].strip(" \t\n…")
            start = index + 1
    yield text[start:].strip(" \t\n…")


def _knowledge_reply(data: dict[str, Any], user_text: str, language: str) -> str:
    """The sentence of the best passage that shares the most words with the customer's question."""
    results = data.get("results")
    best = results[0] if isinstance(results, list) and results and isinstance(results[0], dict) else {}
    wanted = set(_words(user_text))
    chosen, score = "", -1
    for sentence in _sentences(str(best.get("passage") or "")):
        if sentence and "{" not in sentence and "}" not in sentence and not _internal_id(sentence):
            shared = len(wanted.intersection(_words(sentence)))
            if shared > score:
                chosen, score = sentence, shared
    if not chosen:
        return _say(language, "nothing_known")
    return _say(language, "found", found=_ended(_shortened(chosen, _MAX_SENTENCE_CHARS)))


def _failure_reply(error: dict[str, Any], tool: str | None, language: str) -> str:
    code = error.get("code")
    if code == "ticket_already_open":
        number = _ticket_code(str(error.get("guidance") or ""))
        if number is None:
            return _say(language, "ticket_already_open_unnumbered")
        return _say(language, "ticket_already_open", number=number)
    if isinstance(code, str) and code in _FAILURES:
        return _say(language, _FAILURES[code])
    if tool == TRANSFER_TO_HUMAN.name:
        return _say(language, "handoff_failed")
    if tool == CREATE_TICKET.name:
        return _say(language, "ticket_failed")
    return _say(language, "failed")


def _result_reply(message: Message, user_text: str, language: str) -> str:
    """What to tell the customer of one tool result: only what it says, never its notes for the model."""
    result = _read_result(message.content)
    if result is None:
        return _say(language, "unreadable")
    tool = message.name
    if not isinstance(result, dict):
        return _generic_reply(result, language)
    if result.get("ok") is False:
        return _failure_reply(json_object(result.get("error")), tool, language)
    if result.get("simulated") is True:
        return _say(language, "simulated")
    if isinstance(result.get(str(Receipt.HANDOFF)), dict):
        return _say(language, "handoff")
    ticket = result.get(str(Receipt.TICKET))
    if isinstance(ticket, dict):
        number = _ticket_code(str(ticket.get("number") or ""))
        return _say(language, "ticket", number=number) if number else _say(language, "ticket_unnumbered")
    if tool == FLAG_CONVERSATION.name:
        return _say(language, "flagged")
    data = json_object(result.get("data"))
    if tool == SEARCH_KNOWLEDGE.name or data.get("tool") == SEARCH_KNOWLEDGE.name:
        return _knowledge_reply(data, user_text, language)
    return _generic_reply(result, language)


def _demo_text(request: ModelRequest, last_user: int) -> str:
    turn = request.messages[last_user + 1 :]
    user_text = request.messages[last_user].content if last_user >= 0 else ""
    language = _language(user_text)
    if last_user >= 0 and any(m.role == "notice" for m in turn):
        # The truthfulness guard pushed the answer back: say nothing it could doubt.
        return _say(language, "unconfirmed")
    results = [m for m in turn if m.role == "tool"]
    if results:
        return " ".join(dict.fromkeys(_result_reply(m, user_text, language) for m in results))
    if not request.tools:
        return f'I am a demo model with no tools here, so I can only echo you: "{_shortened(user_text, 200)}".'
    names = ", ".join(t.name.replace("_", " ") for t in request.tools)
    return (
        "I am a demo model: I match your words against this agent's tools, and none fits what you wrote. "
        f"I can help with: {names}."
    )


def _word_pieces(text: str) -> list[str]:
    """`text` in word-sized pieces, each word with the space after it: joined, exactly `text`."""
    words = text.split(" ")
    return [word + " " for word in words[:-1]] + [words[-1]]


def _word_count(text: str) -> int:
    return len(text.split())


def demo_complete(request: ModelRequest) -> ModelResponse:
    """The offline demo model: deterministic, at most one tool call per user turn, and honest about being a demo.
    Its text reaches the request's sink word by word, as a streamed answer does, with no wait between the words."""
    last_user = max((i for i, m in enumerate(request.messages) if m.role == "user"), default=-1)
    input_tokens = _word_count(request.system) + sum(_word_count(m.content) for m in request.messages)
    # At most one tool per user turn: once this turn has called a tool, the next answer is the summary. An answer
    # pushed back by the truthfulness guard is followed by its notice: no tool either, the next answer is plain.
    already_called = any(
        (m.role == "assistant" and m.tool_calls) or m.role == "notice" for m in request.messages[last_user + 1 :]
    )
    if last_user >= 0 and request.tools and request.tool_choice == "auto" and not already_called:
        user_text = request.messages[last_user].content
        tool = _handoff_tool(user_text, request.tools) or demo_pick_tool(user_text, request.tools)
        if tool is not None:
            arguments = json.dumps(demo_arguments(tool, user_text), sort_keys=True, ensure_ascii=False)
            turn = sum(1 for m in request.messages if m.role == "assistant")
            digest = hashlib.sha256(f"{turn}|{tool.name}|{arguments}".encode()).hexdigest()[:12]
            return ModelResponse(
                text="",
                tool_calls=(ToolCallRequest(id=f"call_demo_{turn}_{digest}", name=tool.name, arguments=arguments),),
                usage=Usage(input_tokens=input_tokens, output_tokens=_word_count(arguments)),
                model_name=DEMO_MODEL_NAME,
            )
    text = f"{DEMO_PREFIX} {_demo_text(request, last_user)}"
    if request.sink is not None:
        for piece in _word_pieces(text):
            request.sink.text(piece)
    return ModelResponse(
        text=text, usage=Usage(input_tokens=input_tokens, output_tokens=_word_count(text)), model_name=DEMO_MODEL_NAME
    )
