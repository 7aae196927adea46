"""Writes for runs: create, submit tool outputs, cancel, expire, sweep, purge (a conversation's own:
conversations/services.py)."""

from __future__ import annotations

import dataclasses
import json
import logging
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

import guard
from agents.models import Agent, AgentVersion
from agents.selectors import agent_get, searchable_sources, split_version
from conversations import services as conversation
from conversations import session_events
from conversations.identity import EndUserClaim, Identity, identity_resolve
from conversations.models import Message as ChatMessage
from conversations.models import Segment, Session, SessionEvent
from conversations.selectors import session_get
from kagent.errors import ApiError, Conflict, NotFound, Unprocessable
from kagent.models import ApiKey, Project
from llm.types import Message
from runs import run_events, transitions
from runs import store as run_store
from runs.approvals import APPROVE_TOOL_CALLS, approvals_closed, expire_approvals_if_due
from runs.engine import client_output_shown
from runs.models import Run, RunEvent, RunStep, ToolCall
from runs.queue import enqueue_run, runs_waiting
from tools.models import HttpTool
from tools.selectors import mcp_granted
from tools.toolset import ToolSetFacts, tool_set_build, tool_set_json, without_client_tools

logger = logging.getLogger(__name__)

SEGMENT_IDLE = timedelta(minutes=30)
HISTORY_MESSAGES = 20
CLIENT_OUTPUT_MAX_BYTES = 16 * 1024
# A queued run nobody claimed for this long lost its queue message (e.g. a broker restart): send it again.
UNREAD_PURGE_AFTER = timedelta(minutes=10)


def _session_for_run(
    project: Project, api_key: ApiKey | None, session_id: str, agent: Agent, identity: Identity
) -> Session:
    session = session_get(project=project, session_id=session_id, key=api_key, check_end_user=False)
    publishable = api_key is not None and not api_key.is_secret
    if publishable and session.end_user_id is not None:
        if identity.end_user is None or identity.end_user.pk != session.end_user_id:
            # As reads answer it: a browser without this user's token learns nothing of their session.
            raise NotFound("No session with that id in this project.")
    if session.agent_id != agent.pk:
        raise Unprocessable("session_agent_mismatch", "This session belongs to another agent.")
    if session.end_user_id is not None:
        if identity.end_user is not None and identity.end_user.pk != session.end_user_id:
            raise Conflict("end_user_mismatch", "This session belongs to another end user.")
    elif identity.end_user is not None:
        raise Conflict("end_user_mismatch", "This session is anonymous; start a new session for a verified user.")
    return session


# --- runs -------------------------------------------------------------------------------------------------------


def _history(session: Session) -> list[Message]:
    """The session's last messages, for the model; an answer that kept unverified claims is followed by a notice
    saying so (the customer may have been shown a neutral reply instead, and the claim is not a fact); the team's
    messages (a live handoff) are notices naming who wrote them."""
    rows = list(
        ChatMessage.objects.filter(session=session)
        .order_by("-created_at", "-id")
        .values("role", "content", "unverified_claims", "author")[:HISTORY_MESSAGES]
    )
    history: list[Message] = []
    for row in reversed(rows):
        if row["role"] == ChatMessage.Role.TEAM:
            # A person of the team wrote it, not the model: told as K-Agent's notice, never as the model's own turn.
            history.append(Message(role="notice", content=conversation.team_notice(row["author"], row["content"])))
            continue
        history.append(Message(role=row["role"], content=row["content"]))
        if row["role"] == ChatMessage.Role.ASSISTANT and row["unverified_claims"]:
            history.append(Message(role="notice", content=guard.history_notice(row["unverified_claims"])))
    return history


def _segment_for(session: Session, what: _WhatRuns, facts: ToolSetFacts, now: Any) -> Segment:
    """The session's current segment, or a new one (first run, version change, or 30 minutes idle).

    The segment's tool set is built as for a stored run; a `store: false` run leaves its client tools out itself.
    A test-panel session runs the draft, so its segment also ends when the draft's tool set changes.
    """
    last = session.segments.order_by("-number").first()
    version = what.version
    number = version.number if version else None
    segment_facts = dataclasses.replace(facts, store=True)
    draft_tools = _tool_set_json(what, segment_facts) if version is None else None
    if (
        last is not None
        and last.version_number == number
        and (version is None or last.version_id == version.pk)
        and (draft_tools is None or last.tool_set == draft_tools)
        and now - session.last_activity_at < SEGMENT_IDLE
    ):
        return last
    return Segment.objects.create(
        session=session,
        number=(last.number + 1) if last else 1,
        version=version,
        version_number=number,
        tool_set=draft_tools if draft_tools is not None else _tool_set_json(what, segment_facts),
        started_at=now,
    )


@dataclass(frozen=True)
class _WhatRuns:
    """The agent, the version a run pins (None: the draft, in the test panel), and the config and the HTTP and MCP
    tools it runs."""

    agent: Agent
    version: AgentVersion | None
    config: dict[str, Any]
    http_tools: dict[str, Any]
    mcp_tools: dict[str, Any]
    has_searchable_knowledge: bool | None = None  # None: not looked up yet

    @classmethod
    def of_version(cls, agent: Agent, version: AgentVersion, has_knowledge: bool | None = None) -> _WhatRuns:
        return cls(agent, version, version.config, version.http_tools, version.mcp_tools, has_knowledge)


def _tool_set_json(what: _WhatRuns, facts: ToolSetFacts) -> list[dict[str, Any]]:
    return tool_set_json(
        tool_set_build(config=what.config, http_tools=what.http_tools, mcp_tools=what.mcp_tools, facts=facts)
    )


def _what_runs(
    project: Project, agent_id: str, version_number: int | None, sandbox: bool, *, check: bool = False
) -> _WhatRuns:
    """What a run runs. A sandbox run runs the draft, unless it is a check's run of a published version."""
    if sandbox and not (check and version_number is not None):
        if version_number is not None:
            raise Unprocessable("invalid_request", "A sandbox run uses the draft; don't pin a version.")
        agent = agent_get(project=project, agent_id=agent_id)
        http_tools = {t.name: t.definition() for t in HttpTool.objects.filter(project=project)}
        mcp = mcp_granted(project_id=project.pk, grants=agent.config.get("tools", {}).get("mcp", []))
        return _WhatRuns(agent, None, agent.config, http_tools, mcp.definitions)
    if version_number is None:
        # The common case in one query: the agent with its latest published version and its knowledge.
        latest = run_store.latest_version(project_id=project.pk, agent_id=agent_id)
        if latest is None:
            agent_get(project=project, agent_id=agent_id)  # a 404 for an agent that isn't there
            raise Conflict("not_published", "This agent has no published version yet. Publish it first.")
        agent, latest_version, has_knowledge = latest
        return _WhatRuns.of_version(agent, latest_version, has_knowledge)
    agent = agent_get(project=project, agent_id=agent_id)
    pinned = AgentVersion.objects.filter(agent=agent, number=version_number).first()
    if pinned is None:
        raise NotFound("This agent has no version with that number.")
    return _WhatRuns.of_version(agent, pinned)


def _split(what: _WhatRuns, sticky: str | None) -> _WhatRuns:
    version = split_version(what.agent, sticky, pinned=what.version)
    if version is None:
        return what
    return _WhatRuns.of_version(what.agent, version, what.has_searchable_knowledge)


def _rate_key(
    run_id: str, identity: Identity, session: Session | None, api_key: ApiKey | None, client_ip: str, sandbox: bool
) -> str:
    """Who the per-user limits of the policy check count against (step 7): the verified end user, else the
    session; a one-shot run without an end user is its own bucket when the business's server (secret key) or the
    dashboard made it (they name `end_user` when they want limits per customer), else the publishable key and the
    caller's address."""
    if identity.end_user is not None:
        key = f"eu:{identity.end_user.pk}"
    elif session is not None:
        key = f"ses:{session.pk}"
    elif api_key is None or api_key.is_secret:
        key = f"run:{run_id}"
    else:
        key = f"anon:{api_key.pk}:{client_ip[:45]}"
    # The test panel's calls never use up a real customer's limits.
    return f"test:{key}"[:100] if sandbox else key


def run_create(
    *,
    project: Project,
    api_key: ApiKey | None,
    agent_id: str,
    text: str,
    version: int | None = None,
    session_id: str | None = None,
    end_user: EndUserClaim | None = None,
    end_user_token: str | None = None,
    store: bool = True,
    allow_actions: bool | None = None,
    metadata: dict[str, Any] | None = None,
    sandbox: bool = False,
    run_real_actions: bool = False,
    client_ip: str = "",
    idempotency: Idempotency | None = None,
    followed_for: float = 0,
    check_options: dict[str, Any] | None = None,
) -> Run:
    """A queued run, enqueued once it is committed. `api_key` None is the dashboard (trusted like a secret key);
    `session_id` None makes a one-shot run; `allow_actions` None means not given. With `idempotency`, see
    `run_create_once`. `followed_for`: the caller follows the run's events for that many seconds from now (a wait,
    an event stream), written with the run (runs/run_events.py)."""
    one_shot = session_id is None
    if allow_actions is not None and not one_shot:
        raise Unprocessable("invalid_request", "allow_actions is for one-shot runs; a session run follows its session.")
    if run_real_actions and not sandbox:
        raise Unprocessable("invalid_request", "run_real_actions applies to sandbox runs only.")
    if sandbox and api_key is not None and not api_key.is_secret:
        raise ApiError("sandbox_requires_secret_key", "Sandbox runs need a secret key (or the dashboard).", status=403)
    if version is not None and api_key is not None and not api_key.is_secret:
        # Visitors run what the business published last: an older version's prompt and tools are superseded.
        raise ApiError(
            "version_pin_requires_secret_key",
            "Pinning a version needs a secret key; a publishable key runs the latest published version.",
            status=403,
        )

    what = _what_runs(project, agent_id, version, sandbox, check=check_options is not None)
    identity = identity_resolve(project=project, api_key=api_key, end_user=end_user, end_user_token=end_user_token)
    if version is None and not sandbox and what.agent.traffic:
        # The business's split: the same end user, else the same conversation, always lands on the same version.
        sticky = (f"eu:{identity.end_user.external_id}" if identity.end_user is not None else None) or session_id
        what = _split(what, sticky)
    options = _RunOptions(
        store,
        bool(allow_actions),
        sandbox,
        run_real_actions,
        metadata or {},
        api_key,
        client_ip,
        idempotency,
        followed_for,
        check_options,
    )
    if one_shot:
        # One row, one statement: no transaction around it.
        run = _new_run(project, what, identity, None, None, options, text, _tool_set(what, identity, None, options))
        run_store.insert_run(run)
        enqueue_run(run.pk)
        return run
    assert session_id is not None
    with transaction.atomic():
        session = _session_for_run(project, api_key, session_id, what.agent, identity)
        # One new run at a time per session. FOR NO KEY UPDATE, not FOR UPDATE: the rows that refer to the session
        # (a completing run's assistant message, a desk row) take its row FOR KEY SHARE, which FOR UPDATE would
        # block; a completion holding its run's row would then wait for this transaction, which waits for that run's
        # row to supersede it (tests/runs/test_session_lock_order.py).
        session = (
            Session.objects.select_for_update(no_key=True, of=("self",)).select_related("end_user").get(pk=session.pk)
        )
        if options.idempotency is not None and api_key is not None:
            # A request racing with this key may have made its run while this one waited for the session.
            earlier = _earlier(api_key, options.idempotency)
            if earlier is not None:
                raise _MadeBefore(earlier)
        if session.status == Session.Status.HANDED_OFF:
            raise Conflict(
                "session_handed_off",
                "A person of the team holds this conversation: the agent answers again once they hand it back. "
                "Write the customer's message with POST /v1/sessions/{id}/messages (role user).",
            )
        if identity.end_user is None and session.end_user_id is not None:
            identity = Identity(session.end_user)
        now = timezone.now()
        segment = _segment_for(session, what, _facts(what, identity, session, options), now)
        tool_set = segment.tool_set if store else without_client_tools(segment.tool_set)
        supersede_open_runs(session)
        history = _history(session)  # after the open run ended or was superseded: with its answer, if it made one
        # The customer wrote again: a closed conversation is open again.
        reopened = session.status == Session.Status.CLOSED
        session.status, session.last_activity_at = Session.Status.OPEN, now
        session.save(update_fields=["status", "last_activity_at"])
        run = _new_run(project, what, identity, session, segment, options, text, tool_set, history)
        run_store.insert_run(run)
        message = ChatMessage.objects.create(
            project=project,
            session=session,
            run=run,
            role=ChatMessage.Role.USER,
            content=text,
            created_at=run.created_at,
        )
        # The conversation's events last: each takes its advisory lock, after which nothing takes another's row.
        if reopened:
            session_events.record_updated(session)
        session_events.record_message(message, session, relayed=store and not sandbox)
        enqueue_run(run.pk)
    return run


@dataclass(frozen=True)
class _RunOptions:
    """How the caller asked for the run to go."""

    store: bool
    allow_actions: bool
    sandbox: bool
    run_real_actions: bool
    metadata: dict[str, Any]
    api_key: ApiKey | None
    client_ip: str
    idempotency: Idempotency | None = None
    followed_for: float = 0
    check_options: dict[str, Any] | None = None


@dataclass(frozen=True)
class Idempotency:
    """A request's `Idempotency-Key` and the digest of what it asked for."""

    key: str
    digest: str


def _earlier(api_key: ApiKey, idempotency: Idempotency) -> Run | None:
    earlier = Run.objects.filter(created_by_key=api_key, idempotency_key=idempotency.key).first()
    if earlier is not None and earlier.idempotency_digest != idempotency.digest:
        raise Conflict(
            "idempotency_key_reused",
            "This Idempotency-Key was used with another request: a new request needs a new key.",
        )
    return earlier


class _MadeBefore(Exception):  # noqa: N818  # not an error: how run_create hands back the run a key made before
    def __init__(self, run: Run) -> None:
        self.run = run


def run_create_once(*, api_key: ApiKey, idempotency: Idempotency, **create: Any) -> tuple[Run, bool]:
    """`run_create` for a request with an `Idempotency-Key`: the run the key made before, or a new one; and whether
    it was made before. The same key with another request is refused (409 `idempotency_key_reused`). Two requests
    racing with one key: the partial unique index lets one INSERT through; the other answers with its run (a session
    run looks again once it holds the session, before it supersedes anything)."""
    earlier = _earlier(api_key, idempotency)
    if earlier is not None:
        return earlier, True
    try:
        # Inside a transaction of the caller's (a test's), a savepoint keeps it usable after a refused INSERT.
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            return run_create(api_key=api_key, idempotency=idempotency, **create), False
    except _MadeBefore as made:
        return made.run, True
    except IntegrityError:
        earlier = _earlier(api_key, idempotency)
        if earlier is None:
            raise
        return earlier, True


def _facts(what: _WhatRuns, identity: Identity, session: Session | None, options: _RunOptions) -> ToolSetFacts:
    has_knowledge = what.has_searchable_knowledge
    if has_knowledge is None:
        has_knowledge = searchable_sources(project_id=what.agent.project_id, agent_id=what.agent.pk).exists()
    return ToolSetFacts(
        one_shot=session is None,
        allow_actions=options.allow_actions,
        verified=identity.verified,
        actions_paused=what.agent.actions_paused,
        store=options.store,
        has_searchable_knowledge=has_knowledge,
    )


def _tool_set(what: _WhatRuns, identity: Identity, session: Session | None, options: _RunOptions) -> list[Any]:
    facts = _facts(what, identity, session, options)
    return _tool_set_json(what, facts)


def _new_run(
    project: Project,
    what: _WhatRuns,
    identity: Identity,
    session: Session | None,
    segment: Segment | None,
    options: _RunOptions,
    text: str,
    tool_set: list[Any],
    history: list[Message] | None = None,
) -> Run:
    now = timezone.now()
    run = Run(
        project=project,
        agent=what.agent,
        version=what.version,
        version_number=what.version.number if what.version else None,
        session=session,
        segment=segment,
        end_user=identity.end_user,
        created_by_key=options.api_key,
        idempotency_key=options.idempotency.key if options.idempotency else "",
        idempotency_digest=options.idempotency.digest if options.idempotency else "",
        input=text,
        store=options.store,
        allow_actions=options.allow_actions,
        sandbox=options.sandbox,
        run_real_actions=options.run_real_actions,
        metadata=options.metadata,
        config=what.config,
        tool_set=tool_set,
        transcript=[m.to_dict() for m in history or []] + [Message(role="user", content=text).to_dict()],
        created_at=now,
        queued_at=now,
        followed_until=now + timedelta(seconds=options.followed_for) if options.followed_for else None,
        check_options=options.check_options,
    )
    run.rate_key = _rate_key(run.pk, identity, session, options.api_key, options.client_ip, options.sandbox)
    if options.check_options is not None:
        # A check's runs count against their check run alone: repeated checks of one customer are not that
        # customer's traffic, and don't use up each other's per-customer limits.
        run.rate_key = f"check:{options.check_options.get('check_run', run.pk)}"
    return run


def supersede_open_runs(session: Session) -> None:
    """A new run on a session supersedes the one still open there."""
    for open_run in Run.objects.filter(session=session, status__in=Run.ACTIVE):
        try:
            run_cancel(run=open_run, reason="superseded")
        except Conflict:
            pass  # it finished on its own a moment ago: nothing left to supersede


def _close_open_calls(run_id: str, now: Any) -> None:
    """The calls a paused or queued run still had open, cancelled with the run, each with its step event (before
    the run's own last event: a stream ends there)."""
    open_calls = ToolCall.objects.filter(
        run_id=run_id,
        status__in=[ToolCall.Status.PENDING, ToolCall.Status.AWAITING_OUTPUT, ToolCall.Status.AWAITING_APPROVAL],
    )
    closed = list(open_calls.order_by("created_at", "pk"))
    open_calls.update(status=ToolCall.Status.CANCELLED, finished_at=now)
    for call in closed:
        run_events.record(run_id, RunEvent.Type.STEP_CREATED, ref=call.pk)
    waited = [call for call in closed if call.status == ToolCall.Status.AWAITING_APPROVAL]
    if waited:
        for call in waited:
            call.status = ToolCall.Status.CANCELLED
        approvals_closed(Run.objects.get(pk=run_id), waited)


def run_cancel(*, run: Run, reason: str = "requested") -> Run:
    """A queued or paused run is cancelled at once; a running one stops at its next step."""
    now = timezone.now()
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status in transitions.CANCEL.sources:
            transitions.transition(
                run.pk,
                transitions.CANCEL,
                cancellation_reason=reason,
                cancel_requested=True,
                completed_at=now,
                required_action=None,
                expires_at=None,
                record_event=False,
            )
            _close_open_calls(run.pk, now)
            run_events.record_status(run.pk, Run.Status.CANCELLED)
        elif locked.status == Run.Status.IN_PROGRESS:
            # Its worker stops at its next step (every fenced write notices) and ends it as cancelled.
            Run.objects.filter(pk=run.pk).update(cancel_requested=True, cancellation_reason=reason)
        else:
            raise Conflict(
                "run_not_active", f"This run is already {locked.status}; only an active run can be cancelled."
            )
    run.refresh_from_db()
    return run


@dataclass(frozen=True)
class ToolOutput:
    """The app's answer to one client tool call."""

    call_id: str
    output: Any
    is_error: bool = False


def run_submit_tool_outputs(*, run: Run, tool_outputs: list[ToolOutput]) -> Run:
    """Resumes a paused run: every open call answered in one request, each output at most 16 KiB of JSON."""
    run_expire_if_due(run=run)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status != Run.Status.REQUIRES_ACTION:
            raise Conflict("run_not_awaiting_outputs", f"This run is {locked.status}, not waiting for tool outputs.")
        if (locked.required_action or {}).get("type") == APPROVE_TOOL_CALLS:
            raise Conflict(
                "run_not_awaiting_outputs",
                "This run waits for a person to approve tool calls (approve_tool_calls), not for tool outputs.",
            )
        open_calls = {
            call.pk: call for call in ToolCall.objects.filter(run=locked, status=ToolCall.Status.AWAITING_OUTPUT)
        }
        seen: set[str] = set()
        updates: list[tuple[ToolCall, dict[str, Any], bool]] = []
        for index, item in enumerate(tool_outputs):
            path = f"$.tool_outputs[{index}]"
            if item.call_id in seen:
                raise Unprocessable("duplicate_call_id", f"{path}: {item.call_id[:60]} is answered twice.")
            seen.add(item.call_id)
            if item.call_id not in open_calls:
                raise Unprocessable(
                    "unknown_call_id", f"{path}: {item.call_id[:60]} is not an open tool call of this run."
                )
            size = len(json.dumps(item.output, ensure_ascii=False).encode())
            if size > CLIENT_OUTPUT_MAX_BYTES:
                raise Unprocessable(
                    "tool_output_too_large",
                    f"{path}.output is {size} bytes of JSON; at most {CLIENT_OUTPUT_MAX_BYTES}.",
                )
            call = open_calls[item.call_id]
            updates.append((call, client_output_shown(call.name, item.output, item.is_error), item.is_error))
        missing = sorted(set(open_calls) - seen)
        if missing:
            raise Unprocessable(
                "tool_outputs_incomplete",
                f"Every open call must be answered in one request; missing: {', '.join(missing)}.",
                details={"missing_call_ids": missing},
            )
        now = timezone.now()
        for call, shown, is_error in updates:
            ToolCall.objects.filter(pk=call.pk).update(
                status=ToolCall.Status.FAILED if is_error else ToolCall.Status.SUCCEEDED, result=shown, finished_at=now
            )
            run_events.record(locked.pk, RunEvent.Type.STEP_CREATED, ref=call.pk)
        transitions.transition(
            locked.pk,
            transitions.RESUME,
            required_action=None,
            expires_at=None,
            queued_at=now,
            resumes=F("resumes") + 1,
        )
        enqueue_run(locked.pk)
    run.refresh_from_db()
    return run


def run_expire_if_due(*, run: Run) -> bool:
    """A paused run whose outputs didn't come within 10 minutes fails with tool_outputs_expired. One that waited for
    approval past its time goes on without the calls nobody approved (runs/approvals.py)."""
    if expire_approvals_if_due(run=run):
        return True
    now = timezone.now()
    with transaction.atomic():
        expired = transitions.transition(
            run.pk,
            transitions.EXPIRE,
            where={"expires_at__lte": now, "required_action__type": "submit_tool_outputs"},
            last_error={"code": "tool_outputs_expired", "message": "No tool outputs arrived within 10 minutes."},
            completed_at=now,
            required_action=None,
            record_event=False,
        )
        if expired:
            _close_open_calls(run.pk, now)
            run_events.record_status(run.pk, transitions.EXPIRE.target)
    if expired:
        run.refresh_from_db()
    return bool(expired)


def run_purge(*, run: Run) -> None:
    """`store: false`: once the result was returned, the content goes; metadata stays."""
    now = timezone.now()
    with transaction.atomic():
        if not Run.objects.filter(pk=run.pk, status__in=Run.TERMINAL, purged_at__isnull=True).update(
            input="",
            output=None,
            transcript=[],
            tool_set=[],
            required_action=None,
            purged_at=now,
            result_delivered=True,
        ):
            return
        purged = list(ChatMessage.objects.filter(run_id=run.pk).values_list("pk", flat=True))
        if purged and run.session_id is not None:
            # Their events go too: a conversation's stream never has to step over a run of events it can't send.
            SessionEvent.objects.filter(session_id=run.session_id, ref__in=purged).delete()
        ChatMessage.objects.filter(run_id=run.pk).delete()
        RunEvent.objects.filter(run_id=run.pk, type=RunEvent.Type.OUTPUT_DELTA).update(text="")  # the answer's pieces
        ToolCall.objects.filter(run_id=run.pk).update(arguments=None, arguments_hash="", result=None, upstream=None)
        RunStep.objects.filter(run_id=run.pk).update(data={})


def _resend_lost_messages(now: datetime) -> int:
    """Sends again the message of each run still queued whose message is lost: once it has waited
    KAGENT_RUN_RESEND_SECONDS in any case (a long backlog, a broker whose queue can't be read), and after
    KAGENT_RUN_RESEND_MISSING_SECONDS when its message is no longer waiting on the broker's queue (taken by a worker
    that was killed before it claimed the run, or gone with a broker that restarted empty). A second message is
    harmless: the claim lets one worker through."""
    resend_before = now - timedelta(seconds=settings.KAGENT_RUN_RESEND_SECONDS)
    missing_s = min(settings.KAGENT_RUN_RESEND_MISSING_SECONDS, settings.KAGENT_RUN_RESEND_SECONDS)
    missing_before = now - timedelta(seconds=missing_s)
    stale = list(
        Run.objects.filter(status=Run.Status.QUEUED, queued_at__lt=missing_before)
        .order_by("queued_at")
        .values_list("pk", "queued_at")[:500]
    )
    waiting = None
    if any(queued_at >= resend_before for _, queued_at in stale):  # read the queue only when it decides something
        waiting = runs_waiting()
    resent = 0
    for run_id, queued_at in stale:
        lost = queued_at < resend_before or (waiting is not None and run_id not in waiting)
        if lost and Run.objects.filter(pk=run_id, status=Run.Status.QUEUED, queued_at=queued_at).update(queued_at=now):
            enqueue_run(run_id)
            resent += 1
    return resent


def run_sweep() -> dict[str, int]:
    """The periodic safety net: re-queue runs whose worker died, resend lost queue messages, expire paused runs,
    purge unread `store: false` runs."""
    now = timezone.now()
    counts = {"requeued": 0, "resent": 0, "expired": 0, "purged": 0}
    for run_id, claims in Run.objects.filter(status=Run.Status.IN_PROGRESS, lease_expires_at__lt=now).values_list(
        "pk", "claims"
    )[:500]:
        if transitions.transition(
            run_id,
            transitions.REQUEUE,
            held_by=claims,
            where={"lease_expires_at__lt": now},
            queued_at=now,
            lease_expires_at=None,
        ):
            logger.warning("run %s: lease expired (worker lost); re-queued", run_id)
            enqueue_run(run_id)
            counts["requeued"] += 1
    counts["resent"] = _resend_lost_messages(now)
    for run in Run.objects.filter(status=Run.Status.REQUIRES_ACTION, expires_at__lte=now)[:500]:
        counts["expired"] += run_expire_if_due(run=run)
    for run in Run.objects.filter(
        store=False, status__in=Run.TERMINAL, purged_at__isnull=True, completed_at__lt=now - UNREAD_PURGE_AFTER
    )[:500]:
        run_purge(run=run)
        counts["purged"] += 1
    return counts
