"""Writes for sessions and runs: create, submit tool outputs, cancel, expire, sweep, purge."""

from __future__ import annotations

import dataclasses
import json
import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agents.models import Agent, AgentVersion
from agents.selectors import agent_get
from kagent.errors import ApiError, Conflict, NotFound, Unprocessable
from kagent.models import ApiKey, Project
from runs.builtin_tools import searchable_sources
from runs.engine import client_output_shown
from runs.identity import Identity, identity_resolve
from runs.llm import Message
from runs.models import Message as ChatMessage
from runs.models import Run, RunStep, Segment, Session, ToolCall
from tools.models import HttpTool
from tools.toolset import ToolSetFacts, tool_set_build, tool_set_json, without_client_tools

logger = logging.getLogger(__name__)

MAX_INPUT = 20_000
SEGMENT_IDLE = timedelta(minutes=30)
HISTORY_MESSAGES = 20
CLIENT_OUTPUT_MAX_BYTES = 16 * 1024
# A queued run nobody claimed for this long lost its queue message (e.g. a broker restart): send it again.
QUEUED_RESEND_AFTER = timedelta(minutes=5)
UNREAD_PURGE_AFTER = timedelta(minutes=10)


def _enqueue(run_id: str) -> None:
    from runs.tasks import execute_run

    transaction.on_commit(lambda: execute_run.delay(run_id))


def check_metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > 50:
        raise Unprocessable("invalid_metadata", "metadata is an object with at most 50 keys.")
    for key, item in value.items():
        if not isinstance(key, str) or not 0 < len(key) <= 64:
            raise Unprocessable("invalid_metadata", "metadata keys are strings of 1 to 64 characters.")
        if not isinstance(item, (str, int, float, bool)) and item is not None:
            raise Unprocessable("invalid_metadata", "metadata values are strings, numbers, booleans or null.")
        if isinstance(item, str) and len(item) > 500:
            raise Unprocessable("invalid_metadata", "metadata values are at most 500 characters.")
    return value


def _bool(value: Any, field: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise Unprocessable("invalid_request", f"{field} is true or false.", details=[{"path": f"$.{field}"}])
    return value


def _check_fields(data: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise Unprocessable("invalid_request", f"Unknown field(s): {', '.join(unknown)[:200]}.")


# --- sessions ---------------------------------------------------------------------------------------------------


def session_create(*, project: Project, api_key: ApiKey, data: dict[str, Any]) -> Session:
    _check_fields(data, {"agent", "end_user", "end_user_token", "metadata"})
    if not isinstance(data.get("agent"), str):
        raise Unprocessable("invalid_request", "agent is required: the id of the agent to talk to.")
    agent = agent_get(project=project, agent_id=data["agent"])
    identity = identity_resolve(
        project=project, api_key=api_key, end_user=data.get("end_user"), end_user_token=data.get("end_user_token")
    )
    return Session.objects.create(
        project=project,
        agent=agent,
        end_user=identity.end_user,
        created_by_key=api_key,
        metadata=check_metadata(data.get("metadata")),
    )


def _session_for_run(project: Project, api_key: ApiKey, session_id: Any, agent: Agent, identity: Identity) -> Session:
    if not isinstance(session_id, str):
        raise Unprocessable("invalid_request", "session is the id of a session.")
    from runs.selectors import session_get

    session = session_get(project=project, api_key=api_key, session_id=session_id)
    if session.agent_id != agent.pk:
        raise Unprocessable("session_agent_mismatch", "This session belongs to another agent.")
    if session.end_user_id is not None:
        if identity.end_user is None:
            if not api_key.is_secret:
                raise ApiError(
                    "end_user_token_required",
                    "This session belongs to a verified end user: send their end_user_token with every run.",
                    status=403,
                )
        elif identity.end_user.pk != session.end_user_id:
            raise Conflict("end_user_mismatch", "This session belongs to another end user.")
    elif identity.end_user is not None:
        raise Conflict("end_user_mismatch", "This session is anonymous; start a new session for a verified user.")
    return session


# --- runs -------------------------------------------------------------------------------------------------------


def _history(session: Session) -> list[Message]:
    rows = list(
        ChatMessage.objects.filter(session=session)
        .order_by("-created_at", "-id")
        .values("role", "content")[:HISTORY_MESSAGES]
    )
    return [Message(role=row["role"], content=row["content"]) for row in reversed(rows)]


def _segment_for(
    session: Session,
    version: AgentVersion | None,
    config: dict[str, Any],
    http_tools: dict[str, Any],
    facts: ToolSetFacts,
    now: Any,
) -> Segment:
    """The session's current segment, or a new one (first run, version change, or 30 minutes idle).

    The segment's tool set is built as for a stored run; a `store: false` run leaves its client tools out itself.
    A test-panel session runs the draft, so its segment also ends when the draft's tool set changes.
    """
    last = session.segments.order_by("-number").first()
    number = version.number if version else None
    segment_facts = dataclasses.replace(facts, store=True)
    draft_tools = (
        tool_set_json(tool_set_build(config=config, http_tools=http_tools, facts=segment_facts))
        if version is None
        else None
    )
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
        tool_set=draft_tools
        if draft_tools is not None
        else tool_set_json(tool_set_build(config=config, http_tools=http_tools, facts=segment_facts)),
        started_at=now,
    )


@transaction.atomic
def run_create(*, project: Project, api_key: ApiKey, data: dict[str, Any], client_ip: str = "") -> Run:
    _check_fields(
        data,
        {
            "agent",
            "version",
            "session",
            "input",
            "end_user",
            "end_user_token",
            "store",
            "allow_actions",
            "metadata",
            "sandbox",
            "run_real_actions",
            "wait",
        },
    )
    if not isinstance(data.get("agent"), str):
        raise Unprocessable("invalid_request", "agent is required: the id of the agent to run.")
    text = data.get("input")
    if not isinstance(text, str) or not text.strip():
        raise Unprocessable("invalid_request", "input is the end user's message: a non-empty string.")
    if len(text) > MAX_INPUT:
        raise Unprocessable("invalid_request", f"input is at most {MAX_INPUT} characters.")
    store = _bool(data.get("store"), "store", True)
    sandbox_value = data.get("sandbox")
    if isinstance(sandbox_value, dict):  # `"sandbox": {"run_real_actions": true}` reads as well as the flat form
        if set(sandbox_value) - {"run_real_actions"}:
            raise Unprocessable("invalid_request", 'sandbox is true/false or {"run_real_actions": true/false}.')
        sandbox = True
        run_real_actions = _bool(sandbox_value.get("run_real_actions"), "sandbox.run_real_actions", False)
        if "run_real_actions" in data:
            raise Unprocessable("invalid_request", "Give run_real_actions once, inside sandbox or beside it.")
    else:
        sandbox = _bool(sandbox_value, "sandbox", False)
        run_real_actions = _bool(data.get("run_real_actions"), "run_real_actions", False)
    one_shot = data.get("session") is None
    if "allow_actions" in data and not one_shot:
        raise Unprocessable("invalid_request", "allow_actions is for one-shot runs; a session run follows its session.")
    allow_actions = _bool(data.get("allow_actions"), "allow_actions", False)
    metadata = check_metadata(data.get("metadata"))
    if run_real_actions and not sandbox:
        raise Unprocessable("invalid_request", "run_real_actions applies to sandbox runs only.")
    if sandbox and not api_key.is_secret:
        raise ApiError("sandbox_requires_secret_key", "Sandbox runs need a secret key (or the dashboard).", status=403)

    version: AgentVersion | None = None
    if not sandbox and data.get("version") is None:
        # The common case in one query: the agent with its latest published version.
        version = (
            AgentVersion.objects.select_related("agent")
            .filter(
                project=project,
                agent_id=data["agent"],
                agent__deleted_at__isnull=True,
                number=F("agent__latest_version_number"),
            )
            .first()
        )
    agent = version.agent if version is not None else agent_get(project=project, agent_id=data["agent"])
    if sandbox:
        if data.get("version") is not None:
            raise Unprocessable("invalid_request", "A sandbox run uses the draft; don't pin a version.")
        config = agent.config
        http_tools = {t.name: t.definition() for t in HttpTool.objects.filter(project=project)}
    else:
        pinned = data.get("version")
        if pinned is not None:
            if isinstance(pinned, bool) or not isinstance(pinned, int) or pinned < 1:
                raise Unprocessable("invalid_request", "version is a published version number (1, 2, …).")
            version = AgentVersion.objects.filter(agent=agent, number=pinned).first()
            if version is None:
                raise NotFound("This agent has no version with that number.")
        elif version is None:
            raise Conflict("not_published", "This agent has no published version yet. Publish it first.")
        config, http_tools = version.config, version.http_tools

    identity = identity_resolve(
        project=project, api_key=api_key, end_user=data.get("end_user"), end_user_token=data.get("end_user_token")
    )
    now = timezone.now()
    session: Session | None = None
    if not one_shot:
        session = _session_for_run(project, api_key, data["session"], agent, identity)
        session = Session.objects.select_for_update().get(pk=session.pk)  # one new run at a time per session
        if identity.end_user is None and session.end_user_id is not None:
            identity = Identity(session.end_user)
    has_knowledge = searchable_sources(project_id=project.pk, agent_id=agent.pk).exists()
    facts = ToolSetFacts(
        one_shot=one_shot,
        allow_actions=allow_actions,
        verified=identity.verified,
        actions_paused=agent.actions_paused,
        store=store,
        has_searchable_knowledge=has_knowledge,
    )
    segment = None
    if session is not None:
        segment = _segment_for(session, version, config, http_tools, facts, now)
        tool_set = segment.tool_set if store else without_client_tools(segment.tool_set)
        history = _history(session)
        for open_run in Run.objects.filter(session=session, status__in=Run.ACTIVE):
            try:
                run_cancel(run=open_run, reason="superseded")
            except Conflict:
                pass  # it finished on its own a moment ago: nothing left to supersede
        Session.objects.filter(pk=session.pk).update(last_activity_at=now)
    else:
        tool_set = tool_set_json(tool_set_build(config=config, http_tools=http_tools, facts=facts))
        history = []

    run = Run(
        project=project,
        agent=agent,
        version=version,
        version_number=version.number if version else None,
        session=session,
        segment=segment,
        end_user=identity.end_user,
        created_by_key=api_key,
        input=text,
        store=store,
        allow_actions=allow_actions,
        sandbox=sandbox,
        run_real_actions=run_real_actions,
        metadata=metadata,
        config=config,
        tool_set=tool_set,
        created_at=now,
        queued_at=now,
    )
    if identity.end_user is not None:
        run.rate_key = f"eu:{identity.end_user.pk}"
    elif session is not None:
        run.rate_key = f"ses:{session.pk}"
    else:
        # An anonymous one-shot call has no identity: it counts against the key and the caller's address.
        run.rate_key = f"anon:{api_key.pk}:{client_ip[:45]}"
    if sandbox:  # the test panel's calls never use up a real customer's limits
        run.rate_key = f"test:{run.rate_key}"[:100]
    run.transcript = [m.to_dict() for m in history] + [Message(role="user", content=text).to_dict()]
    run.save(force_insert=True)
    if session is not None:  # a one-shot run keeps its input on the run itself
        ChatMessage.objects.create(
            project=project, session=session, run=run, role=ChatMessage.Role.USER, content=text, created_at=now
        )
    _enqueue(run.pk)
    return run


def run_cancel(*, run: Run, reason: str = "requested") -> Run:
    """A queued or paused run is cancelled at once; a running one stops at its next step."""
    now = timezone.now()
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status in (Run.Status.QUEUED, Run.Status.REQUIRES_ACTION):
            Run.objects.filter(pk=run.pk).update(
                status=Run.Status.CANCELLED,
                cancellation_reason=reason,
                cancel_requested=True,
                completed_at=now,
                required_action=None,
                expires_at=None,
            )
            ToolCall.objects.filter(
                run=run, status__in=[ToolCall.Status.PENDING, ToolCall.Status.AWAITING_OUTPUT]
            ).update(status=ToolCall.Status.CANCELLED, finished_at=now)
        elif locked.status == Run.Status.IN_PROGRESS:
            Run.objects.filter(pk=run.pk).update(cancel_requested=True, cancellation_reason=reason)
        else:
            raise Conflict(
                "run_not_active", f"This run is already {locked.status}; only an active run can be cancelled."
            )
    run.refresh_from_db()
    return run


def run_submit_tool_outputs(*, run: Run, data: dict[str, Any]) -> Run:
    _check_fields(data, {"tool_outputs"})
    outputs = data.get("tool_outputs")
    if not isinstance(outputs, list) or not outputs:
        raise Unprocessable("invalid_request", 'tool_outputs is a list of {"call_id", "output", "is_error"}.')
    run_expire_if_due(run=run)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status != Run.Status.REQUIRES_ACTION:
            raise Conflict("run_not_awaiting_outputs", f"This run is {locked.status}, not waiting for tool outputs.")
        open_calls = {
            call.pk: call for call in ToolCall.objects.filter(run=locked, status=ToolCall.Status.AWAITING_OUTPUT)
        }
        seen: set[str] = set()
        updates: list[tuple[ToolCall, dict[str, Any], bool]] = []
        for index, item in enumerate(outputs):
            path = f"$.tool_outputs[{index}]"
            if not isinstance(item, dict) or set(item) - {"call_id", "output", "is_error"} or "call_id" not in item:
                raise Unprocessable("invalid_request", f'{path}: each output is {{"call_id", "output", "is_error"}}.')
            call_id = item["call_id"]
            if not isinstance(call_id, str):
                raise Unprocessable("invalid_request", f"{path}.call_id is the string id of an open tool call.")
            if call_id in seen:
                raise Unprocessable("duplicate_call_id", f"{path}: {str(call_id)[:60]} is answered twice.")
            seen.add(call_id)
            if call_id not in open_calls:
                raise Unprocessable(
                    "unknown_call_id", f"{path}: {str(call_id)[:60]} is not an open tool call of this run."
                )
            is_error = item.get("is_error") or False
            if not isinstance(is_error, bool):
                raise Unprocessable("invalid_request", f"{path}.is_error is true or false.")
            size = len(json.dumps(item.get("output"), ensure_ascii=False).encode())
            if size > CLIENT_OUTPUT_MAX_BYTES:
                raise Unprocessable(
                    "tool_output_too_large",
                    f"{path}.output is {size} bytes of JSON; at most {CLIENT_OUTPUT_MAX_BYTES}.",
                )
            call = open_calls[call_id]
            updates.append((call, client_output_shown(call.name, item.get("output"), is_error), is_error))
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
        Run.objects.filter(pk=locked.pk).update(
            status=Run.Status.QUEUED, required_action=None, expires_at=None, queued_at=now
        )
        _enqueue(locked.pk)
    run.refresh_from_db()
    return run


def run_expire_if_due(*, run: Run) -> bool:
    """A paused run whose outputs didn't come within 10 minutes fails with tool_outputs_expired."""
    now = timezone.now()
    with transaction.atomic():
        expired = Run.objects.filter(pk=run.pk, status=Run.Status.REQUIRES_ACTION, expires_at__lte=now).update(
            status=Run.Status.FAILED,
            last_error={"code": "tool_outputs_expired", "message": "No tool outputs arrived within 10 minutes."},
            completed_at=now,
            required_action=None,
        )
        if expired:
            ToolCall.objects.filter(run_id=run.pk, status=ToolCall.Status.AWAITING_OUTPUT).update(
                status=ToolCall.Status.CANCELLED, finished_at=now
            )
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
        ChatMessage.objects.filter(run_id=run.pk).delete()
        ToolCall.objects.filter(run_id=run.pk).update(arguments=None, arguments_hash="", result=None, upstream=None)
        RunStep.objects.filter(run_id=run.pk).update(data={})


def run_sweep() -> dict[str, int]:
    """The periodic safety net: re-queue runs whose worker died, resend lost queue messages, expire paused runs,
    purge unread `store: false` runs."""
    from runs.tasks import execute_run

    now = timezone.now()
    counts = {"requeued": 0, "resent": 0, "expired": 0, "purged": 0}
    for run_id, claims in Run.objects.filter(status=Run.Status.IN_PROGRESS, lease_expires_at__lt=now).values_list(
        "pk", "claims"
    )[:500]:
        if Run.objects.filter(pk=run_id, status=Run.Status.IN_PROGRESS, claims=claims, lease_expires_at__lt=now).update(
            status=Run.Status.QUEUED, queued_at=now, lease_expires_at=None
        ):
            logger.warning("run %s: lease expired (worker lost); re-queued", run_id)
            execute_run.delay(run_id)
            counts["requeued"] += 1
    for run_id in Run.objects.filter(status=Run.Status.QUEUED, queued_at__lt=now - QUEUED_RESEND_AFTER).values_list(
        "pk", flat=True
    )[:500]:
        Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(queued_at=now)
        execute_run.delay(run_id)
        counts["resent"] += 1
    for run in Run.objects.filter(status=Run.Status.REQUIRES_ACTION, expires_at__lte=now)[:500]:
        counts["expired"] += run_expire_if_due(run=run)
    for run in Run.objects.filter(
        store=False, status__in=Run.TERMINAL, purged_at__isnull=True, completed_at__lt=now - UNREAD_PURGE_AFTER
    )[:500]:
        run_purge(run=run)
        counts["purged"] += 1
    return counts
