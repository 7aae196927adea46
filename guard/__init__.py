"""The truthfulness guard: no confirmation reaches a customer that a tool did not produce (SPEC §5).

What is checked is where each fact of an answer came from, not how it is phrased: the answer is read as the
customer sees it (`reading`), each reference and figure must appear in a source of the conversation and each action
said to be done needs a call that did it (`claims`, with the words of every language in `lexicons/`), sentence by
sentence, so that the stream gate (`stream`) releases a sentence only once it is whole and has passed. `facts` is
what the conversation holds. Measured on the labelled corpus in `tests/truth/corpus/` (`bench/truth_eval.py`).

Imports nothing of the apps: the engine hands it the conversation as `Facts`.
"""

from guard.claims import KINDS, UNBACKED_ACTION, UNCHECKED, UNGROUNDED_FIGURE, UNGROUNDED_REFERENCE, Claim
from guard.facts import Call, Facts
from guard.notices import MAX_PUSHBACKS, history_notice, pushback_notice
from guard.reading import rendered
from guard.stream import CHECK_BUDGET_S, UNCHECKED_CLAIM, AnswerEnd, AnswerStream, check

__all__ = [
    "CHECK_BUDGET_S",
    "KINDS",
    "MAX_PUSHBACKS",
    "UNBACKED_ACTION",
    "UNCHECKED",
    "UNCHECKED_CLAIM",
    "UNGROUNDED_FIGURE",
    "UNGROUNDED_REFERENCE",
    "AnswerEnd",
    "AnswerStream",
    "Call",
    "Claim",
    "Facts",
    "check",
    "history_notice",
    "pushback_notice",
    "rendered",
]
