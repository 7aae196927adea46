"""The answer shown as the model writes it (SPEC §4 "Run events": `run.output.delta`, `run.output.reset`).

A model call's text arrives in pieces (runs/providers: the request's `sink`). Each piece goes, in order, through
  1. the recovery of tool calls written as text (llm/written_calls.py `WrittenCallFilter`): a block is never shown,
     not even its first characters;
  2. the truthfulness guard over a streamed answer (guard/stream.py `AnswerStream`): only whole sentences it has
     checked are released, and nothing after a possible claim — no unverified confirmation is shown even for an
     instant;
and what is released is written as a `run.output.delta` event (its text in the row), which wakes the run's followers.

Deltas are written while someone follows the run (a stream, a wait: `followed_until`, looked at when there is
something to release, at most once a second); released text nobody follows is kept and written with the run's
completion, in its one statement (runs/store.py `complete`), as one delta: the log of a run that completes always
holds deltas that, after its last reset, join into `output.text`. `reset()` discards what was shown — a model call
that turns out to be a tool round, a push-back of the truthfulness guard, an attempt retried after a failure, or an
answer whose claims remain — with one `run.output.reset` event, written only when something had been shown.

The engine's database connection: written here while the run waits on the model (runs/lease.py), each write takes
a connection from the pool and gives it back.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import guard
from kagent.sql import execute
from llm.written_calls import WrittenCallFilter
from runs import run_events
from runs.lease import release_connection
from runs.models import RunEvent

FOLLOWED_LOOK_S = 1.0  # an unfollowed run is looked at again this often while it has text to release

_FOLLOWED_SQL = f"SELECT {run_events.FOLLOWED_SQL} FROM runs_run WHERE id = %(run)s"  # noqa: S608 - our constant
_EVENT_SQL = (
    "INSERT INTO runs_runevent (run_id, type, ref, text, created_at) VALUES (%(run)s, %(type)s, '', %(text)s, now())"
)


def _clean(text: str) -> str:
    # As the engine stores the answer (runs/engine/rounds.py `_clean`): per character, the same on pieces as on all.
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


class LiveAnswer:
    """The sink of one run's model calls (llm.types.TextSink), for the run's whole time in this worker."""

    def __init__(self, run_id: str, facts: Callable[[], guard.Facts], *, followed: bool = False) -> None:
        self.run_id = run_id
        self._facts = facts
        self.shown = ""  # written as deltas since the last reset: what a follower may have on screen
        self._kept = ""  # released, not written (nobody followed): written with the completion
        self._filter = WrittenCallFilter()
        self._guard: guard.AnswerStream | None = None
        self._followed = followed
        self._looked = time.monotonic() if followed else 0.0

    # --- the provider's side (llm.types.TextSink) ---

    def text(self, delta: str) -> None:
        visible = self._filter.feed(_clean(delta))
        if not visible:
            return
        if self._guard is None:
            self._guard = guard.AnswerStream(self._facts())
        released = self._guard.feed(visible)
        if released:
            self._release(released)

    def restart(self) -> None:
        self.reset()

    # --- the engine's side ---

    def reset(self) -> None:
        """The answer so far is void: the next one starts from nothing (and a follower is told, if it was shown)."""
        if self.shown:
            self._write(RunEvent.Type.OUTPUT_RESET, "")
        self.shown = self._kept = ""
        self._filter = WrittenCallFilter()
        self._guard = None

    def rest(self, final_text: str) -> str:
        """What the run's completion writes as its last delta, for the answer `final_text`: the text not shown yet
        (a reset first when what was shown isn't its start: the engine's fallback answer replaced an empty one)."""
        if not final_text.startswith(self.shown):
            self.reset()
        rest = final_text[len(self.shown) :]
        self.shown, self._kept = "", ""
        self._filter, self._guard = WrittenCallFilter(), None
        return rest

    def _release(self, text: str) -> None:
        self._kept += text
        if not self._is_followed():
            return
        self._write(RunEvent.Type.OUTPUT_DELTA, self._kept)
        self.shown += self._kept
        self._kept = ""

    def _is_followed(self) -> bool:
        if self._followed:
            return True
        now = time.monotonic()
        if now - self._looked < FOLLOWED_LOOK_S and self._looked:
            return False
        self._looked = now
        rows = execute(_FOLLOWED_SQL, {"run": self.run_id})
        release_connection()
        self._followed = bool(rows and rows[0][0])
        return self._followed

    def _write(self, kind: str, text: str) -> None:
        execute(_EVENT_SQL, {"run": self.run_id, "type": kind, "text": text})
        release_connection()
        run_events.publish(self.run_id)
