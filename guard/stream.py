"""The stream gate: what of an answer may be shown while the model writes it, and the whole answer's verdict.

SPEC §4 "Run events": a `run.output.delta` carries only text the guard has passed; no unverified confirmation is
shown, not even for an instant. Every check reads one sentence (guard/claims.py), so a sentence is held until it is
whole (guard/reading.py `Reader`) and released once it passes; from the first sentence that fails on, nothing more
is released (the answer goes back to the model, or ends on a reset). `finish()` reads the rest and answers the
whole answer's claims: the same sentences, read by the same reader, as `check()` reads a finished answer — `check`
is this gate fed the whole answer at once.

Released text, joined, is always a prefix of the answer stripped (as the engine stores it), Markdown and all: the
gate releases the answer as written up to where a passed sentence ends.

Time: reading is linear in the answer; one budget (`CHECK_BUDGET_S`) bounds the whole answer's checking, stream
and finish together. An answer that can't be read within it is a claim (`unchecked`), never a pass.
"""

from __future__ import annotations

import dataclasses
import time

from guard.claims import UNCHECKED, Claim, Ground, sentence_claims
from guard.facts import Facts
from guard.lexicon import INDEX, Index
from guard.reading import Reader, Sentence

CHECK_BUDGET_S = 1.0
UNCHECKED_CLAIM = Claim(UNCHECKED, "the answer could not be checked in time")


@dataclasses.dataclass(frozen=True)
class AnswerEnd:
    """What `AnswerStream.finish()` says: the rest of the answer to show ("" when claims remain) and the claims of
    the whole answer (the engine's verdict: none, or a push-back and a reset)."""

    delta: str
    claims: list[Claim]


class AnswerStream:
    """The guard over one answer as it is written: `feed(chunk)` answers the text that became safe to show (""
    when none did), `finish()` the rest or the claims."""

    def __init__(self, facts: Facts, index: Index = INDEX) -> None:
        self._ground = Ground(facts, index)
        self._index = index
        self._reader = Reader(index.abbreviations)
        self._answer: list[str] = []  # the answer after what was released
        self._shown: list[str] = []
        self._shown_end = 0  # where the released text ends in the answer
        self._safe_end = 0  # where the sentences that passed end
        self._claims: list[Claim] = []
        self._spent = 0.0
        self._finished = False

    @property
    def shown(self) -> str:
        """Everything released so far, joined."""
        return "".join(self._shown)

    @property
    def blocked(self) -> bool:
        return bool(self._claims)

    def feed(self, chunk: str) -> str:
        if self._finished:
            raise RuntimeError("the answer was finished")
        self._answer.append(chunk)
        if not chunk:
            return ""
        self._read(lambda: self._reader.feed(chunk))
        return self._release(self._safe_end)

    def finish(self) -> AnswerEnd:
        if self._finished:
            raise RuntimeError("the answer was finished")
        self._finished = True
        self._read(self._reader.close)
        if self._claims:
            return AnswerEnd("", list(self._claims))
        rest = "".join(self._answer).rstrip()
        return AnswerEnd(self._release(self._shown_end + len(rest)), [])

    def _read(self, step: object) -> None:
        if UNCHECKED_CLAIM in self._claims:
            return
        started = time.monotonic()
        self._ground.deadline = started + CHECK_BUDGET_S - self._spent
        try:
            assert callable(step)
            for sentence in step():
                if time.monotonic() >= self._ground.deadline:
                    raise TimeoutError("the truthfulness check ran out of time")
                self._check(sentence)
        except TimeoutError:
            self._claims.append(UNCHECKED_CLAIM)
        finally:
            self._spent += time.monotonic() - started

    def _check(self, sentence: Sentence) -> None:
        claims = sentence_claims(sentence, self._ground, self._index)
        for claim in claims:
            if claim not in self._claims:
                self._claims.append(claim)
        if not self._claims:
            self._safe_end = sentence.end

    def _release(self, end: int) -> str:
        if end <= self._shown_end:
            return ""
        unshown = "".join(self._answer)
        delta, rest = unshown[: end - self._shown_end], unshown[end - self._shown_end :]
        if not self._shown:
            delta = delta.lstrip()  # the engine strips the answer
        self._answer = [rest]
        self._shown_end = end
        if delta:
            self._shown.append(delta)
        return delta


def check(text: str, facts: Facts, index: Index = INDEX) -> list[Claim]:
    """The claims of a finished answer: the stream gate fed the whole answer."""
    stream = AnswerStream(facts, index)
    stream.feed(text)
    return stream.finish().claims
