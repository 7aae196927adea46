"""The run engine: claim a queued run, then work in rounds until the model answers without tools.

Everything needed to resume lives in the database (the transcript, the tool calls with their statuses), so a
worker that dies mid-run loses nothing: the sweeper re-queues the run when its lease expires and any worker picks
it up. A tool call that succeeded is never sent again; one that was in flight is retried with the same id (sent as
`webhook-id`, so the business can deduplicate).
"""

from __future__ import annotations

import logging
import time

from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from kagent.errors import OUTAGES
from llm import providers
from llm.types import ModelError
from runs import store
from runs.engine.calls import FAILURE_BANNER
from runs.engine.decisions import client_output_shown
from runs.engine.rounds import Rounds
from runs.engine.state import RUN_TIME_LIMIT_S, RunStopped
from runs.lease import lease
from runs.models import Run

__all__ = ["FAILURE_BANNER", "Engine", "client_output_shown", "providers", "run_execute", "store"]

logger = logging.getLogger(__name__)

MAX_CLAIMS = 5


def run_execute(run_id: str) -> None:
    """Claim a queued run (exactly one worker wins) and advance it as far as it goes."""
    run = _claim(run_id)
    if run is None:
        return
    store.crash_point("claimed")
    Engine(run).advance()


def _claim(run_id: str) -> Run | None:
    """The claim is a task's first statement. A worker's connection is kept between tasks without a health check
    per task, so a connection broken meanwhile (the database restarted) is noticed here: tried once more on a new
    one. Nothing was written by the failed attempt."""
    for attempt in (1, 2):
        now = timezone.now()
        try:
            return store.claim(run_id, now=now, lease_until=now + lease())
        except (InterfaceError, OperationalError):
            if attempt == 2:
                raise
            logger.warning("run %s: the database connection was broken; reconnecting", run_id)
            connection.close()
    return None


class Engine(Rounds):
    """The loop over a run's rounds; each of its parts is a layer below (rounds, tool calls, decisions, endings,
    the state)."""

    def advance(self) -> None:
        if self.claim - self.run.resumes > MAX_CLAIMS:
            # A run that took its worker down this many times would take the next one down too. (A pause's resume is
            # a claim too, but no crash: approvals and client tools may pause a run once a round.)
            logger.error("run %s: claimed %s times without finishing; failing it", self.run.pk, self.claim)
            self._fail("internal_error", "This run could not be completed; it was stopped after repeated failures.")
            return
        try:
            self._loop()
        except RunStopped:
            logger.info("run %s: stopped (no longer owned by this worker)", self.run.pk)
        except ModelError as exc:
            self._fail("model_error", f"The model could not answer: {str(exc)[:300]}")
        except OUTAGES:
            # The database or Redis out of reach for a moment (a restart, a failover): not the run's fault. Left as a
            # crash leaves it: its lease runs out and the sweep queues it again, to go on where its writes stopped.
            # (Failing it here would wait for the database to come back, and fail a run that can still finish.)
            logger.warning(
                "run %s: the database or redis is out of reach; left for recovery", self.run.pk, exc_info=True
            )
        except Exception:
            logger.exception("run %s: internal error", self.run.pk)
            self._fail("internal_error", "Something went wrong on our side while running this.")

    def _loop(self) -> None:
        while True:
            # A cancel is noticed by every fenced write and before every tool call; a model call has no side effect,
            # so it needs no check of its own.
            if self.cancelled:
                self._finish_cancelled()
                return
            if time.monotonic() > self.deadline:
                logger.error("run %s: over %.0f s in this worker; failing it", self.run.pk, RUN_TIME_LIMIT_S)
                self._fail("internal_error", "This run took too long and was stopped.")
                return
            open_round = self._open_round()
            if open_round is not None:
                if not self._process_round(open_round):
                    return  # paused for client tool outputs, or cancelled
                continue

            tools_left = self.run.rounds < self.max_rounds and bool(self.run.tool_set)
            response, step = self._call_model("auto" if tools_left else "none")
            # A model that asks for tools it may not use (after the last round, or with none offered) hears why
            # once, through the policy check, and then answers with tools disabled.
            refusal_round = self.run.rounds == self.max_rounds or (not self.run.tool_set and self.run.rounds == 0)
            if response.tool_calls and (tools_left or refusal_round):
                self.live.reset()  # a tool round: whatever of its text was shown is not the answer
                self._start_round(response, step)
                continue
            if self._finish_with_answer(response.text, step):
                return

    def _open_round(self) -> int | None:
        """The round whose tool results are not yet in the transcript, if any."""
        if self.transcript and self.transcript[-1].role == "assistant" and self.transcript[-1].tool_calls:
            return self.run.rounds
        return None
