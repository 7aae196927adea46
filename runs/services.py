"""A run's creation: what runs (the agent's version, its traffic split, the tool set), on which conversation and
segment, with which history, once per Idempotency-Key. What happens to it after: runs/lifecycle.py; a conversation's
own writes: conversations/services.py."""

from __future__ import annotations

import dataclasses
import logging
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Required, TypedDict, Unpack

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

import guard
from agents.models import Agent, AgentVersion
from agents.selectors import agent_get, searchable_sources, split_version
from conversations import services as conversation
from conversations import session_events
from conversations.identity import EndUserClaim, Identity, identity_resolve
from conversations.models import Message as ChatMessage
from conversations.models import Segment, Session
from conversations.selectors import session_get
from kagent.errors import ApiError, Conflict, NotFound, Unprocessable
from kagent.models import ApiKey, Project
from llm.types import Message
from runs import creation
from runs.lifecycle import supersede_open_runs
from runs.models import Run
from runs.queue import enqueue_run
from tools.models import HttpTool
from tools.selectors import mcp_granted
from tools.toolset import ToolSetFacts, tool_set_build, tool_set_json, without_client_tools

logger = logging.getLogger(__name__)

SEGMENT_IDLE = timedelta(minutes=30)
HISTORY_MESSAGES = 20


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
        latest = creation.latest_version(project_id=project.pk, agent_id=agent_id)
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


class RunRequest(TypedDict, total=False):
    """What a run is created with (`run_create`'s keyword arguments, typed once). `api_key` None is the dashboard
    (trusted like a secret key); `session_id` None makes a one-shot run; `allow_actions` None means not given.
    `followed_for`: the caller follows the run's events for that many seconds from now (a wait, an event stream),
    written with the run (runs/run_events.py)."""

    project: Required[Project]
    api_key: Required[ApiKey | None]
    agent_id: Required[str]
    text: Required[str]
    version: int | None
    session_id: str | None
    end_user: EndUserClaim | None
    end_user_token: str | None
    store: bool
    allow_actions: bool | None
    metadata: dict[str, Any] | None
    sandbox: bool
    run_real_actions: bool
    client_ip: str
    followed_for: float
    check_options: dict[str, Any] | None


def run_create(**request: Unpack[RunRequest]) -> Run:
    """A queued run, enqueued once it is committed (with an `Idempotency-Key`: `run_create_once`)."""
    return _create(request, None)[0]


def _create(request: RunRequest, idempotency: Idempotency | None) -> tuple[Run, bool]:
    """The run, and whether it is the one `idempotency`'s key made before (found once the session is held)."""
    project, api_key, agent_id, text = request["project"], request["api_key"], request["agent_id"], request["text"]
    version, session_id = request.get("version"), request.get("session_id")
    sandbox, run_real_actions = request.get("sandbox", False), request.get("run_real_actions", False)
    allow_actions, check_options = request.get("allow_actions"), request.get("check_options")
    store = request.get("store", True)
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
    identity = identity_resolve(
        project=project, api_key=api_key, end_user=request.get("end_user"), end_user_token=request.get("end_user_token")
    )
    if version is None and not sandbox and what.agent.traffic:
        # The business's split: the same end user, else the same conversation, always lands on the same version.
        sticky = (f"eu:{identity.end_user.external_id}" if identity.end_user is not None else None) or session_id
        what = _split(what, sticky)
    options = _RunOptions(
        store,
        bool(allow_actions),
        sandbox,
        run_real_actions,
        request.get("metadata") or {},
        api_key,
        request.get("client_ip", ""),
        idempotency,
        request.get("followed_for", 0),
        check_options,
    )
    if one_shot:
        # One row, one statement: no transaction around it.
        run = _new_run(project, what, identity, None, None, options, text, _tool_set(what, identity, None, options))
        creation.insert_run(run)
        enqueue_run(run.pk)
        return run, False
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
                return earlier, True
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
        creation.insert_run(run)
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
    return run, False


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


def run_create_once(*, idempotency: Idempotency, **request: Unpack[RunRequest]) -> tuple[Run, bool]:
    """`run_create` for a request with an `Idempotency-Key`: the run the key made before, or a new one; and whether
    it was made before. The same key with another request is refused (409 `idempotency_key_reused`). Two requests
    racing with one key: the partial unique index lets one INSERT through; the other answers with its run (a session
    run looks again once it holds the session, before it supersedes anything)."""
    api_key = request["api_key"]
    assert api_key is not None  # a key's request: the dashboard sends none
    earlier = _earlier(api_key, idempotency)
    if earlier is not None:
        return earlier, True
    try:
        # Inside a transaction of the caller's (a test's), a savepoint keeps it usable after a refused INSERT.
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            return _create(request, idempotency)
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
