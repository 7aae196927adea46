"""A run's status: which change may follow which, in one table, and the one function that makes a change.

    queued ──claim──▶ in_progress ──pause──▶ requires_action ──resume──▶ queued …
      │                 │  ├─complete─▶ completed                 ├─expire─▶ failed
      │                 │  ├─fail─────▶ failed                    └─cancel─▶ cancelled
      └─cancel─▶ cancelled └─cancel──▶ cancelled, requeue (lease expired) ─▶ queued

Every change is one conditional UPDATE naming the statuses it may leave (STYLE, "State machines"): the loser of a
race updates nothing and learns it from the count. A worker's changes also name the claim it holds (`claims`), so
a worker whose lease ran out and whose run another worker took writes nothing at all ("fenced": `held_by`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from runs import run_events
from runs.models import Run

S = Run.Status

# What may follow what. Terminal statuses lead nowhere.
ALLOWED: dict[str, frozenset[str]] = {
    S.QUEUED: frozenset({S.IN_PROGRESS, S.CANCELLED}),
    S.IN_PROGRESS: frozenset({S.REQUIRES_ACTION, S.COMPLETED, S.FAILED, S.CANCELLED, S.QUEUED}),
    S.REQUIRES_ACTION: frozenset({S.QUEUED, S.FAILED, S.CANCELLED}),
    S.COMPLETED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}


@dataclass(frozen=True)
class Move:
    """A named change: from any of `sources` to `target`."""

    name: str
    sources: tuple[str, ...]
    target: str

    def __post_init__(self) -> None:
        for source in self.sources:
            if self.target not in ALLOWED[source]:
                raise ValueError(f"{self.name}: {source} -> {self.target} is not an allowed transition")


CLAIM = Move("claim", (S.QUEUED,), S.IN_PROGRESS)  # a worker takes a queued run (exactly one wins)
PAUSE = Move("pause", (S.IN_PROGRESS,), S.REQUIRES_ACTION)  # client tool calls wait for the app
COMPLETE = Move("complete", (S.IN_PROGRESS,), S.COMPLETED)
FAIL = Move("fail", (S.IN_PROGRESS,), S.FAILED)
STOP = Move("stop", (S.IN_PROGRESS,), S.CANCELLED)  # a running run noticed its cancel
CANCEL = Move("cancel", (S.QUEUED, S.REQUIRES_ACTION), S.CANCELLED)  # nobody is working on it: at once
RESUME = Move("resume", (S.REQUIRES_ACTION,), S.QUEUED)  # the app submitted every output
EXPIRE = Move("expire", (S.REQUIRES_ACTION,), S.FAILED)  # no outputs within 10 minutes
REQUEUE = Move("requeue", (S.IN_PROGRESS,), S.QUEUED)  # its worker died: the lease ran out


def transition(
    run_id: str,
    move: Move,
    *,
    held_by: int | None = None,
    where: dict[str, Any] | None = None,
    record_event: bool = True,
    **fields: Any,
) -> bool:
    """Makes `move` (and writes `fields`) if the run is in one of its sources — and, with `held_by`, still held by
    that claim — and `where` holds, with the run's status event in the same transaction (unless the caller records
    it itself, after what must come before it). True when this call made the change."""
    runs = Run.objects.filter(pk=run_id, status__in=move.sources, **(where or {}))
    if held_by is not None:
        runs = runs.filter(claims=held_by)
    with transaction.atomic():
        changed = runs.update(status=move.target, **fields) == 1
        if changed and record_event:
            run_events.record_status(run_id, move.target)
    return changed


def update_held(run_id: str, *, held_by: int, where: dict[str, Any] | None = None, **fields: Any) -> bool:
    """Writes `fields` to a run this worker holds (in progress, its claim), without changing its status."""
    runs = Run.objects.filter(pk=run_id, status=S.IN_PROGRESS, claims=held_by, **(where or {}))
    return runs.update(**fields) == 1


def is_held(run_id: str, *, held_by: int) -> bool:
    return Run.objects.filter(pk=run_id, status=S.IN_PROGRESS, claims=held_by).exists()
