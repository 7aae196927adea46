"""The run engine's durable reads and writes on its hot path, in as few statements as its guarantees allow.

Why SQL by hand here (see kagent/sql.py): building these statements with the ORM was a large share of a worker's
CPU per run (bench/README.md), and each write the engine makes is really several rows that must land together. On
PostgreSQL each function below is ONE statement: a data-modifying CTE puts the run's fenced UPDATE and the rows that
depend on it in one round trip, in autocommit (one statement is one transaction), prepared once per connection.

What doesn't change: every write that touches a run names the claim this worker holds and the statuses it may leave
(`runs/transitions.py`), so a worker that lost its run writes nothing; an HTTP tool call is recorded as `running`
before it is sent and its result (with the egress log row of the attempt) right after it returns.

A fault hook for the crash tests: `KAGENT_TEST_CRASH_AT=<point>` makes a worker SIGKILL itself right after the
write named by <point> (`claimed`, `round`, `running`, `sent`, `result`, `completed`) — once, when
`KAGENT_TEST_CRASH_MARKER` names a file it may create. See `crash_point`; never set in production.
"""

from __future__ import annotations

import copy
import enum
import logging
import os
import signal
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from conversations import session_events
from conversations.models import EndUser, SessionEvent
from conversations.models import Message as ChatMessage
from hooks import outbox
from kagent.egress import record_in_log
from kagent.ids import new_id
from kagent.models import EgressEvent
from kagent.sql import execute, json_text, jsonb_loaded
from runs import run_events, transitions, webhook_events
from runs.models import Run, RunEvent, RunStep, ToolCall

logger = logging.getLogger(__name__)
S = Run.Status


class Fence(enum.Enum):
    """How a fenced write went: written; not written because the run was cancelled meanwhile (it is still ours to
    end); not written because the run is no longer ours (another worker has it, or it ended)."""

    WRITTEN = "written"
    CANCELLED = "cancelled"
    LOST = "lost"


def crash_point(point: str) -> None:
    """The crash tests' fault hook: a worker whose environment names this point dies here, as in a power cut."""
    if os.environ.get("KAGENT_TEST_CRASH_AT") != point:
        return
    marker = os.environ.get("KAGENT_TEST_CRASH_MARKER")
    if marker:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return  # this worker already died here once
    os.kill(os.getpid(), signal.SIGKILL)


# --- claim --------------------------------------------------------------------------------------------------------

_RUN_COLUMNS = (
    "id",
    "project_id",
    "agent_id",
    "session_id",
    "end_user_id",
    "rate_key",
    "store",
    "sandbox",
    "run_real_actions",
    "config",
    "tool_set",
    "transcript",
    "rounds",
    "usage",
    "pushbacks",
    "claims",
    "resumes",
    "cancel_requested",
    "status",
    "followed_until",  # the engine streams the answer to a follower (runs/live_answer.py)
    "check_options",  # a check's run answers client tools and counts approvals as given (checks/services.py)
    # The rest of what the API renders of a run: its completion's webhook event carries the run as it was then.
    "version_number",
    "input",
    "metadata",
    "created_at",
    "started_at",
)
_JSON_COLUMNS = {"config", "tool_set", "transcript", "usage", "metadata", "check_options"}


_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz_")


def _status_in(move: transitions.Move) -> str:
    """`status IN (...)` for a move's sources, written into the statement (a list parameter costs psycopg a Python
    dumper on every call): our own constants, checked to be plain words."""
    assert all(source and set(source) <= _WORD_CHARS for source in move.sources), move.sources
    quoted = ", ".join(f"'{source}'" for source in move.sources)
    return f"status IN ({quoted})"


_CLAIM_SQL = f"""
WITH claimed AS (
    UPDATE runs_run
    SET status = %(target)s, started_at = COALESCE(started_at, %(now)s), lease_expires_at = %(lease)s,
        claims = claims + 1
    WHERE id = %(run)s AND {_status_in(transitions.CLAIM)}
    RETURNING {", ".join(_RUN_COLUMNS)}, {run_events.FOLLOWED_SQL}
), event AS ({run_events.insert_sql("claimed", type_param="event")})
SELECT claimed.*, end_user.external_id, end_user.traits
FROM claimed LEFT JOIN runs_enduser AS end_user ON end_user.id = claimed.end_user_id
"""


def claim(run_id: str, *, now: datetime, lease_until: datetime) -> Run | None:
    """Claims a queued run (exactly one worker wins) and loads what the engine needs of it, with its end user."""
    move = transitions.CLAIM
    rows = execute(
        _CLAIM_SQL,
        {
            "run": run_id,
            "target": move.target,
            "now": now,
            "lease": lease_until,
            "event": RunEvent.Type.IN_PROGRESS,
        },
    )
    if not rows:
        return None
    values = dict(zip((*_RUN_COLUMNS, "followed", "external_id", "traits"), rows[0], strict=True))
    run_events.notify_if_followed(run_id, values.pop("followed"))
    external_id, traits = values.pop("external_id"), values.pop("traits")
    for column in _JSON_COLUMNS:
        values[column] = jsonb_loaded(values[column])
    run = Run(**values)
    run._state.adding = False
    if run.end_user_id is not None:
        run.end_user = EndUser(
            id=run.end_user_id, project_id=run.project_id, external_id=external_id, traits=jsonb_loaded(traits) or {}
        )
    else:
        run.end_user = None
    return run


# --- a round: the model's step, its tool calls (the first one already decided) ------------------------------------

_TOOL_CALL_COLUMNS = (
    ("id", "text"),
    ("project_id", "text"),
    ("run_id", "text"),
    ("round", "integer"),
    ("index", "integer"),
    ("model_call_id", "text"),
    ("requested_name", "text"),
    ("name", "text"),
    ("kind", "text"),
    ("effect", "text"),
    ("arguments", "jsonb"),
    ("arguments_hash", "text"),
    ("rate_key", "text"),
    ("policy_decision", "text"),
    ("policy_code", "text"),
    ("status", "text"),
    ("result", "jsonb"),
    ("upstream", "jsonb"),
    ("simulated", "boolean"),
    ("approval", "jsonb"),
    ("attempts", "integer"),
    ("created_at", "timestamptz"),
    ("started_at", "timestamptz"),
    ("finished_at", "timestamptz"),
)
_STEP_INSERT = """
    INSERT INTO runs_runstep (id, run_id, kind, round, data, created_at, duration_ms)
    SELECT %(step_id)s, id, %(step_kind)s, %(step_round)s, %(step_data)s::jsonb, %(step_at)s, %(step_ms)s FROM {source}
"""
_ROUND_SQL: dict[tuple[int, int], str] = {}
FINAL_STATUSES = (
    ToolCall.Status.SUCCEEDED,
    ToolCall.Status.FAILED,
    ToolCall.Status.REFUSED,
    ToolCall.Status.CANCELLED,
)


def _round_sql(calls: int, step_events: int) -> str:
    """The round write for `calls` tool calls and `step_events` events (one prepared statement per shape)."""
    shape = (calls, step_events)
    if shape not in _ROUND_SQL:
        columns = ", ".join(f'"{name}"' for name, _ in _TOOL_CALL_COLUMNS)
        rows = ", ".join(
            "(" + ", ".join(f"%(c{i}_{name})s::{kind}" for name, kind in _TOOL_CALL_COLUMNS) + ")" for i in range(calls)
        )
        event_rows = ", ".join(f"({i}, %(v{i}_type)s, %(v{i}_ref)s)" for i in range(step_events))
        _ROUND_SQL[shape] = f"""
WITH held AS (
    UPDATE runs_run
    SET rounds = %(rounds)s, transcript = %(transcript)s::jsonb, usage = %(usage)s::jsonb, lease_expires_at = %(lease)s
    WHERE id = %(run)s AND status = %(held_status)s AND claims = %(held_by)s
        AND (%(despite_cancel)s OR NOT cancel_requested)
    RETURNING id, {run_events.FOLLOWED_SQL}
), step AS ({_STEP_INSERT.format(source="held")}), calls AS (
    INSERT INTO runs_toolcall ({columns})
    SELECT v.* FROM held, (VALUES {rows}) AS v({columns})
), events AS (
    INSERT INTO runs_runevent (run_id, type, ref, created_at)
    SELECT held.id, v.type, v.ref, now() FROM held, (VALUES {event_rows}) AS v(n, type, ref) ORDER BY v.n
)
SELECT count(*), bool_or(followed) FROM held
"""
    return _ROUND_SQL[shape]


def _step_events(step: RunStep, calls: Sequence[ToolCall]) -> list[str]:
    """The refs of a round's `run.step.created` events: the model's step, and each call already decided for good. A
    step has one event, with what it ended as: a call sent now has its event when its result is written, a client
    tool's when the app's output is (its request is the run's `run.requires_action`)."""
    return [step.pk, *(call.pk for call in calls if call.status in FINAL_STATUSES)]


def _step_params(step: RunStep) -> dict[str, Any]:
    return {
        "step_id": step.pk,
        "step_kind": step.kind,
        "step_round": step.round,
        "step_data": json_text(step.data),
        "step_at": step.created_at,
        "step_ms": step.duration_ms,
    }


def _call_value(call: ToolCall, column: str, kind: str) -> Any:
    value = getattr(call, column)
    if kind == "jsonb":
        return None if value is None else json_text(value)
    return value


def record_round(
    run: Run,
    *,
    held_by: int,
    rounds: int,
    transcript: list[dict[str, Any]],
    lease_until: datetime,
    step: RunStep,
    calls: Sequence[ToolCall],
    despite_cancel: bool = False,
) -> Fence:
    """The model's step and the tool calls it asked for, with the round count, the transcript and their events, in
    one fenced write. Not written when a cancel arrived (CANCELLED), unless `despite_cancel`."""
    refs = _step_events(step, calls)
    params: dict[str, Any] = {
        "run": run.pk,
        "held_status": S.IN_PROGRESS,
        "held_by": held_by,
        "rounds": rounds,
        "transcript": json_text(transcript),
        "usage": json_text(run.usage),
        "lease": lease_until,
        "despite_cancel": despite_cancel,
        **_step_params(step),
    }
    for i, call in enumerate(calls):
        for name, kind in _TOOL_CALL_COLUMNS:
            params[f"c{i}_{name}"] = _call_value(call, name, kind)
    for i, ref in enumerate(refs):
        params[f"v{i}_type"], params[f"v{i}_ref"] = RunEvent.Type.STEP_CREATED, ref
    written, followed = execute(_round_sql(len(calls), len(refs)), params)[0]
    if written:
        run_events.notify_if_followed(run.pk, followed)
        return Fence.WRITTEN
    return _fence_missed(run.pk, held_by)


def _fence_missed(run_id: str, held_by: int) -> Fence:
    return Fence.CANCELLED if transitions.is_held(run_id, held_by=held_by) else Fence.LOST


# --- a tool call: sent (running), then its result ----------------------------------------------------------------

_DECISION_FIELDS = (
    "name",
    "kind",
    "effect",
    "arguments",
    "arguments_hash",
    "policy_decision",
    "policy_code",
    "approval",
)
_RUNNING_SQL = """
WITH held AS (
    UPDATE runs_run SET lease_expires_at = %(lease)s
    WHERE id = %(run)s AND status = %(held_status)s AND claims = %(held_by)s AND NOT cancel_requested
    RETURNING id
)
UPDATE runs_toolcall
SET status = %(status)s, attempts = attempts + 1, started_at = %(now)s, name = %(name)s, kind = %(kind)s,
    effect = %(effect)s, arguments = %(arguments)s::jsonb, arguments_hash = %(arguments_hash)s,
    policy_decision = %(policy_decision)s, policy_code = %(policy_code)s, approval = %(approval)s::jsonb
WHERE id = %(call)s AND EXISTS (SELECT 1 FROM held)
RETURNING id
"""


def mark_running(call: ToolCall, *, run_id: str, held_by: int, now: datetime, lease_until: datetime) -> Fence:
    """Records that `call` is about to be sent (with its policy decision), fenced on the run and on no cancel having
    arrived. After a crash a `running` call is sent again with the same id, never forgotten."""
    params = {
        "run": run_id,
        "held_status": S.IN_PROGRESS,
        "held_by": held_by,
        "lease": lease_until,
        "call": call.pk,
        "status": ToolCall.Status.RUNNING,
        "now": now,
        **{name: getattr(call, name) for name in _DECISION_FIELDS},
    }
    params["arguments"] = None if call.arguments is None else json_text(call.arguments)
    params["approval"] = None if call.approval is None else json_text(call.approval)
    if execute(_RUNNING_SQL, params):
        return Fence.WRITTEN
    return _fence_missed(run_id, held_by)


# The run's row is read with a lock (FOR SHARE) before the call's row is updated: the result's event and a
# follower's `followed_until` are then ordered like those of the writes that update the run's row (runs/run_events.py),
# and the locks are taken in the order every other writer takes them (the run's row, then its calls': a worker that
# took the run over and ends it meanwhile waits rather than deadlocks). The uncorrelated EXISTS is evaluated once,
# before the call's row is looked at.
_RESULT_UPDATE = f"""
followed AS MATERIALIZED (
    SELECT id, {run_events.FOLLOWED_SQL} FROM runs_run WHERE id = %(run)s FOR SHARE
), updated AS (
    UPDATE runs_toolcall SET status = %(status)s, result = %(result)s::jsonb, upstream = %(upstream)s::jsonb,
        finished_at = %(now)s
    WHERE id = %(call)s AND status = %(running)s AND EXISTS (SELECT 1 FROM followed)
    RETURNING run_id AS id
)"""
_RESULT_WRITTEN = "SELECT count(*), bool_or(followed) FROM updated CROSS JOIN followed"
_RESULT_SQL = f"""
WITH {_RESULT_UPDATE}, event AS ({run_events.insert_sql("updated", type_param="event", ref_param="call")})
{_RESULT_WRITTEN}
"""


def record_attempt(record: EgressEvent) -> None:
    """An HTTP or MCP tool call's attempt in the egress log (kagent.egress.log, its one writer)."""
    record_in_log(record)


def record_result(call: ToolCall, *, now: datetime) -> None:
    """A sent call's outcome, with its event. Only a call still `running` takes the result (a run that ended
    meanwhile closed its calls)."""
    params: dict[str, Any] = {
        "run": call.run_id,
        "call": call.pk,
        "status": call.status,
        "running": ToolCall.Status.RUNNING,
        "result": None if call.result is None else json_text(call.result),
        "upstream": None if call.upstream is None else json_text(call.upstream),
        "now": now,
        "event": RunEvent.Type.STEP_CREATED,
    }
    written, followed = execute(_RESULT_SQL, params)[0]
    if written:
        run_events.notify_if_followed(call.run_id, followed)


# --- the end: completed with the answer --------------------------------------------------------------------------

_COMPLETE_SQL = f"""
WITH done AS (
    UPDATE runs_run
    SET status = %(target)s, output = %(output)s::jsonb, completed_at = %(now)s, lease_expires_at = NULL,
        transcript = %(transcript)s::jsonb, usage = %(usage)s::jsonb
    WHERE id = %(run)s AND {_status_in(transitions.COMPLETE)} AND claims = %(held_by)s AND NOT cancel_requested
    RETURNING id, project_id, session_id, sandbox, store, {run_events.FOLLOWED_SQL}
), step AS ({_STEP_INSERT.format(source="done")}), message AS (
    INSERT INTO runs_message (id, project_id, session_id, run_id, role, content, unverified_claims, created_at)
    SELECT %(message_id)s, project_id, session_id, id, %(role)s, %(text)s, %(claims)s::jsonb, %(now)s
    FROM done WHERE session_id IS NOT NULL
    RETURNING session_id
), session_event AS ({session_events.message_event_sql("message", message_param="message_id")}
), relayed AS ({session_events.relayed_sql("done", message_param="message_id")}
), relayed_webhook AS (
    {
    outbox.insert_sql(
        "relayed", id_param="message_webhook_event", type_param="message_event", data_param="message_data"
    )
}
), events AS (
    INSERT INTO runs_runevent (run_id, type, ref, text, created_at)
    SELECT done.id, v.type, v.ref, v.text, now()
    FROM done, (
        VALUES (0, %(step_event)s, %(step_id)s, ''), (1, %(answer_event)s, '', %(answer_text)s),
            (2, %(done_event)s, '', '')
    ) AS v(n, type, ref, text)
    WHERE v.type <> ''
    ORDER BY v.n
), webhook AS ({outbox.insert_sql("done", id_param="webhook_event", type_param="done_event", data_param="run_data")})
SELECT (SELECT count(*) FROM done), (SELECT id FROM webhook), (SELECT followed FROM done),
    (SELECT session_id FROM message), (SELECT id FROM relayed_webhook)
"""


def complete(
    run: Run,
    *,
    held_by: int,
    text: str,
    output: dict[str, Any],
    transcript: list[dict[str, Any]],
    step: RunStep,
    now: datetime,
    delta: str = "",
    reset: bool = False,
) -> Fence:
    """The run completed with its answer: the final step and, in a session, the assistant's message, in one write;
    with the last `run.output.delta` of the answer shown as it was written (`delta`: what was not shown yet,
    runs/live_answer.py), or a `run.output.reset` (`reset`: its claims remain, nothing of it may stay on screen)."""
    move = transitions.COMPLETE
    claims = output.get("unverified_claims") or []
    message = ChatMessage(
        id=new_id("msg"),
        project_id=run.project_id,
        session_id=run.session_id,
        run_id=run.pk,
        role=ChatMessage.Role.ASSISTANT,
        content=text,
        unverified_claims=claims,
        created_at=now,
    )
    # The webhook events carry the run and the message as they are at this moment (rendered here, sent only where an
    # endpoint wants them: the statement decides).
    as_done = copy.copy(run)
    as_done.output, as_done.completed_at = output, now
    params = {
        "run": run.pk,
        "target": move.target,
        "held_by": held_by,
        "output": json_text(output),
        "transcript": json_text(transcript),
        "usage": json_text(run.usage),
        "now": now,
        "message_id": message.pk,
        "role": message.role,
        "text": text,
        "claims": json_text(claims),
        "message_event": SessionEvent.Type.MESSAGE_CREATED,
        "message_webhook_event": new_id("evt"),
        "message_data": session_events.message_json(message) if run.session_id is not None and run.store else None,
        "run_data": json_text(webhook_events.run_data(as_done, move.target)),
        "step_event": RunEvent.Type.STEP_CREATED,
        "done_event": RunEvent.Type.COMPLETED,
        "answer_event": RunEvent.Type.OUTPUT_RESET if reset else RunEvent.Type.OUTPUT_DELTA if delta else "",
        "answer_text": "" if reset else delta,
        "webhook_event": new_id("evt"),
        **_step_params(step),
    }
    written, webhook_event, followed, session_id, message_webhook_event = execute(_COMPLETE_SQL, params)[0]
    if written:
        run_events.notify_if_followed(run.pk, followed)
        for event in (webhook_event, message_webhook_event):
            if event is not None:
                outbox.dispatch(event)
        if session_id is not None:
            session_events.notify(session_id)
        return Fence.WRITTEN
    return _fence_missed(run.pk, held_by)
