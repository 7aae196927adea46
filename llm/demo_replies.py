"""What the demo model (llm/demo.py) says in words: a tool result told as a person would tell it, in the customer's
language (never its JSON, K-Agent's ids or its notes for the model; a failure as a plain apology), the plain "I can't
confirm that" after the truthfulness guard pushed an answer back, and the answer when no tool fits."""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable
from typing import Any, Final

from llm.demo_words import content_words
from llm.transport import json_object
from llm.types import Message, ModelRequest
from tools.builtin_defs import CREATE_TICKET, FLAG_CONVERSATION, SEARCH_KNOWLEDGE, TRANSFER_TO_HUMAN
from tools.builtin_tool import Receipt

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
    wanted = set(content_words(user_text))
    chosen, score = "", -1
    for sentence in _sentences(str(best.get("passage") or "")):
        if sentence and "{" not in sentence and "}" not in sentence and not _internal_id(sentence):
            shared = len(wanted.intersection(content_words(sentence)))
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


def demo_text(request: ModelRequest, last_user: int) -> str:
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
