"""Writes for agents: create, update the draft, delete, publish an immutable version; knowledge sources: write
(split and indexed in the same transaction), fetch API sources, refresh them on schedule and on demand."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import DataError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from agents.config_validation import validate_config
from agents.knowledge.fetch import FetchOutcome, fetch_source
from agents.knowledge.index import replace_passages
from agents.knowledge.passages import split_text
from agents.knowledge.terms import TERMS_VERSION
from agents.models import Agent, AgentVersion, KnowledgePassage, KnowledgeSource
from kagent import broker
from kagent.egress import EgressError, destination_check
from kagent.errors import Conflict, Unprocessable
from kagent.inputs import UNSET, is_set
from kagent.merge_patch import merge_patch
from kagent.models import Project, SigningSecret
from kagent.secrets import signing_secrets_valid
from tools import builtins
from tools.models import HttpTool
from tools.selectors import McpGrantProblem, mcp_granted
from tools.validation import split_url

logger = logging.getLogger(__name__)


def _grants_refused(problems: list[McpGrantProblem]) -> Unprocessable:
    first = problems[0]
    return Unprocessable(
        first.code,
        f"{first.path}: {first.message}.",
        details=[{"path": problem.path, "message": problem.message} for problem in problems],
    )


def _project_config(project_id: str, config: dict[str, Any], before: dict[str, Any] | None = None) -> dict[str, Any]:
    """`validate_config` and what only the project can tell: a new grant of an MCP tool its server lists as not
    grantable is refused. A server or tool not there yet may be granted in the draft, like an HTTP tool, and a grant
    made before its tool stopped being grantable stays (an unrelated edit is not refused for it): publishing refuses
    both."""
    checked = validate_config(config)
    grants = checked["tools"]["mcp"]
    if grants:
        kept = {(g.get("server"), g.get("tool")) for g in ((before or {}).get("tools") or {}).get("mcp", [])}
        refused = [
            problem
            for problem in mcp_granted(project_id=project_id, grants=grants).not_grantable()
            if (grants[problem.at]["server"], grants[problem.at]["tool"]) not in kept
        ]
        if refused:
            raise _grants_refused(refused)
    return checked


def agent_create(
    *,
    project: Project,
    name: str,
    description: str | None = "",
    config: dict[str, Any] | None = None,
    actions_paused: bool = False,
) -> Agent:
    return Agent.objects.create(
        project=project,
        name=name.strip(),
        description=(description or "").strip(),
        config=_project_config(project.pk, config or {}),
        actions_paused=actions_paused,
    )


def traffic_checked(agent: Agent, traffic: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """A split over published versions: each once, integer weights summing to 100 (None clears it). Raises
    Unprocessable (`invalid_traffic`, at the entry's path)."""
    if traffic is None:
        return None

    def refuse(path: str, message: str) -> Unprocessable:
        return Unprocessable("invalid_traffic", f"{path}: {message}", details=[{"path": path, "message": message}])

    if not traffic:
        raise refuse("$.traffic", "name at least one version (or null to clear the split)")
    published = set(AgentVersion.objects.filter(agent=agent).values_list("number", flat=True))
    seen: set[int] = set()
    for index, entry in enumerate(traffic):
        number = entry["version"]
        if number not in published:
            raise refuse(f"$.traffic[{index}].version", f"version {number} of this agent is not published")
        if number in seen:
            raise refuse(f"$.traffic[{index}].version", f"version {number} is named twice")
        seen.add(number)
    total = sum(entry["weight"] for entry in traffic)
    if total != 100:
        raise refuse("$.traffic", f"the weights sum to {total}; they must sum to 100")
    return [{"version": int(entry["version"]), "weight": int(entry["weight"])} for entry in traffic]


def agent_update(
    *,
    agent: Agent,
    name: str = UNSET,
    description: str | None = UNSET,
    config_patch: dict[str, Any] = UNSET,
    actions_paused: bool = UNSET,
    traffic: list[dict[str, Any]] | None = UNSET,
) -> Agent:
    """Top-level fields replace; `config_patch` is a JSON merge patch (RFC 7396) on the draft, checked whole.
    `actions_paused` and `traffic` apply at once, to every run that starts after, without publishing."""
    changes: dict[str, Any] = {}
    if is_set(name):
        changes["name"] = name.strip()
    if is_set(description):
        changes["description"] = (description or "").strip()
    if is_set(config_patch):
        changes["config"] = _project_config(agent.project_id, merge_patch(agent.config, config_patch), agent.config)
    if is_set(actions_paused):
        changes["actions_paused"] = actions_paused
    if is_set(traffic):
        changes["traffic"] = traffic_checked(agent, traffic)
    if changes:
        changes["updated_at"] = timezone.now()
        Agent.objects.filter(pk=agent.pk).update(**changes)
        for key, value in changes.items():
            setattr(agent, key, value)
    return agent


def agent_rollback(*, agent: Agent, version: int) -> Agent:
    """All traffic to published `version`, at once: the split becomes that one version."""
    return agent_update(agent=agent, traffic=[{"version": version, "weight": 100}])


def agent_delete(*, agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(deleted_at=timezone.now())


@transaction.atomic
def agent_publish(
    *,
    agent: Agent,
    note: str | None = "",
    check_failures: list[dict[str, Any]] | None = None,
    draft_of: datetime | None = None,
) -> AgentVersion:
    """Version n+1: the draft config and copies of every granted HTTP tool and MCP tool as they are now."""
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    if draft_of is not None and locked.updated_at != draft_of:
        # Its checks ran on an earlier draft: what would be published now was never checked.
        raise Conflict("draft_changed", "The draft changed while its checks ran. Publish again to check this draft.")
    config = validate_config(locked.config)
    mcp = mcp_granted(project_id=locked.project_id, grants=config["tools"]["mcp"])
    granted = [grant["tool"] for grant in config["tools"]["http"]]
    tools = {tool.name: tool for tool in HttpTool.objects.filter(project_id=locked.project_id, name__in=granted)}
    missing = [name for name in granted if name not in tools]
    if missing:
        raise Unprocessable(
            "unknown_tool",
            f"The draft grants HTTP tool(s) that don't exist: {', '.join(missing)}. Create them or remove the grant.",
            details=[{"path": "$.config.tools.http", "message": f"no such tool: {name}"} for name in missing],
        )
    if mcp.problems:
        raise _grants_refused(mcp.problems)
    number = (locked.latest_version_number or 0) + 1
    version = AgentVersion.objects.create(
        project_id=locked.project_id,
        agent=locked,
        number=number,
        note=(note or "").strip(),
        config=config,
        http_tools={name: tools[name].definition() for name in granted},
        mcp_tools=mcp.definitions,
        builtin_versions=builtins.versions(),
        forced=bool(check_failures),
        check_failures=check_failures or [],
    )
    Agent.objects.filter(pk=locked.pk).update(latest_version_number=number)
    agent.latest_version_number = number
    return version


# --- knowledge ----------------------------------------------------------------------------------------------------

DEFAULT_REFRESH_MINUTES = 60
MIN_REFRESH_MINUTES = 15
# A queued fetch that hasn't finished in this long is taken as lost (a worker died): another may be queued.
FETCH_QUEUE_STALE = timedelta(minutes=10)
FETCH_TASK = "agents.knowledge_fetch"
REINDEX_BATCH = 20


def _kind_refusal(field: str, kind: str) -> Unprocessable:
    other = "api" if kind == KnowledgeSource.Kind.TEXT else "text"
    message = f"{field} is for {other} sources; this source is {kind}."
    return Unprocessable("invalid_request", message, details=[{"path": f"$.{field}", "message": message}])


def knowledge_url_check(url: str) -> str:
    """An API source's URL: checked like an HTTP tool's (https, port 443 or 8443, a host name, no user information),
    fetched as written (no placeholders: no identity or secret can be put in it), and one the outbound client takes."""
    if "{{" in url or "}}" in url:
        raise Unprocessable(
            "invalid_url",
            "A knowledge source's URL is fetched as written: it can't hold placeholders.",
            details=[{"path": "$.url", "message": "placeholders are not allowed"}],
        )
    if not url.startswith("https://"):
        message = "A knowledge source's URL starts with https:// (https://host[:port]/path)."
        raise Unprocessable("invalid_url", message, details=[{"path": "$.url", "message": message}])
    try:
        split_url(url)
        destination_check(url)
    except Unprocessable as exc:
        raise Unprocessable(exc.code, exc.message, details=[{"path": "$.url", "message": exc.message}]) from None
    except EgressError as exc:
        message = f"K-Agent won't fetch this URL: {exc.message}."
        raise Unprocessable("invalid_url", message, details=[{"path": "$.url", "message": message}]) from None
    return url


def _reindex(source: KnowledgeSource) -> None:
    """The source's passages made again from its title and content; in the caller's transaction."""
    count = replace_passages(
        connection=connection,
        passage_model=KnowledgePassage,
        project_id=source.project_id,
        source_id=source.pk,
        drafts=split_text(source_title=source.title, content=source.content),
    )
    KnowledgeSource.objects.filter(pk=source.pk).update(passage_count=count, index_version=TERMS_VERSION)
    source.passage_count, source.index_version = count, TERMS_VERSION


def _queue_fetch(source: KnowledgeSource) -> bool:
    """Queues one fetch of an API source after commit, unless one is queued already. Whether it queued one."""
    now = timezone.now()
    claimed = (
        KnowledgeSource.objects.filter(pk=source.pk, kind=KnowledgeSource.Kind.API)
        .filter(Q(fetch_queued_at__isnull=True) | Q(fetch_queued_at__lt=now - FETCH_QUEUE_STALE))
        .update(fetch_queued_at=now)
    )
    if claimed:
        source.fetch_queued_at = now
        source_id = source.pk
        broker.enqueue(FETCH_TASK, source_id)
    return bool(claimed)


@transaction.atomic
def knowledge_source_create(
    *,
    project: Project,
    title: str,
    agent: Agent | None = None,
    kind: str = KnowledgeSource.Kind.TEXT,
    content: str | None = None,
    url: str | None = None,
    response: dict[str, Any] | None = None,
    refresh_minutes: int | None = None,
    searchable: bool = True,
) -> KnowledgeSource:
    """A text source is split and indexed at once; an API source is fetched right after the commit, then every
    `refresh_minutes`."""
    if kind == KnowledgeSource.Kind.TEXT:
        for field, value in (("url", url), ("response", response), ("refresh_minutes", refresh_minutes)):
            if value is not None:
                raise _kind_refusal(field, kind)
        if not (content or "").strip():
            raise Unprocessable(
                "invalid_request",
                "content is required for a text source.",
                details=[{"path": "$.content", "message": "required"}],
            )
        source = KnowledgeSource.objects.create(
            project=project, agent=agent, title=title.strip(), kind=kind, content=content or "", searchable=searchable
        )
        _reindex(source)
        return source
    if content is not None:
        raise _kind_refusal("content", kind)
    for field, value in (("url", url), ("response", response)):
        if value is None:
            raise Unprocessable(
                "invalid_request",
                f"{field} is required for an api source.",
                details=[{"path": f"$.{field}", "message": "required"}],
            )
    minutes = refresh_minutes or DEFAULT_REFRESH_MINUTES
    source = KnowledgeSource.objects.create(
        project=project,
        agent=agent,
        title=title.strip(),
        kind=kind,
        url=knowledge_url_check(url or ""),
        response=response or {},
        refresh_minutes=minutes,
        next_fetch_at=timezone.now() + timedelta(minutes=minutes),
        searchable=searchable,
        index_version=TERMS_VERSION,
    )
    _queue_fetch(source)
    return source


@transaction.atomic
def knowledge_source_update(
    *,
    source: KnowledgeSource,
    title: str = UNSET,
    content: str = UNSET,
    searchable: bool = UNSET,
    url: str = UNSET,
    response: dict[str, Any] = UNSET,
    refresh_minutes: int = UNSET,
) -> KnowledgeSource:
    """Changed title or content: the passages are made again. Changed URL or response shaping: fetched again (the
    passages of the last good fetch stay until then). Changed schedule: the next fetch moves."""
    kind = source.kind
    if kind == KnowledgeSource.Kind.TEXT:
        for field, value in (("url", url), ("response", response), ("refresh_minutes", refresh_minutes)):
            if is_set(value):
                raise _kind_refusal(field, kind)
    elif is_set(content):
        raise _kind_refusal("content", kind)
    source = KnowledgeSource.objects.select_for_update().get(pk=source.pk)
    changes: dict[str, Any] = {}
    if is_set(title) and title.strip() != source.title:
        changes["title"] = title.strip()
    if is_set(content) and content != source.content:
        if not content.strip():
            message = "Write the content: it can't be empty."
            raise Unprocessable("invalid_request", message, details=[{"path": "$.content", "message": message}])
        changes["content"] = content
    if is_set(searchable) and searchable != source.searchable:
        changes["searchable"] = searchable
    if is_set(url) and url != source.url:
        changes["url"] = knowledge_url_check(url)
    if is_set(response) and response != source.response:
        changes["response"] = response
    if is_set(refresh_minutes) and refresh_minutes != source.refresh_minutes:
        changes["refresh_minutes"] = refresh_minutes
        changes["next_fetch_at"] = (source.last_fetch_at or timezone.now()) + timedelta(minutes=refresh_minutes)
    if not changes:
        return source
    changes["updated_at"] = timezone.now()
    KnowledgeSource.objects.filter(pk=source.pk).update(**changes)
    for key, value in changes.items():
        setattr(source, key, value)
    if "title" in changes or "content" in changes:
        _reindex(source)
    if "url" in changes or "response" in changes:
        KnowledgeSource.objects.filter(pk=source.pk).update(fetch_queued_at=None)
        source.fetch_queued_at = None
        _queue_fetch(source)
    return source


def knowledge_source_delete(*, source: KnowledgeSource) -> None:
    """The source and its passages (the search index goes with them)."""
    source.delete()


def knowledge_source_refresh(*, source: KnowledgeSource) -> KnowledgeSource:
    """Fetch an API source now (after the commit), unless a fetch is already queued."""
    if source.kind != KnowledgeSource.Kind.API:
        raise Conflict(
            "not_refreshable", "Only api sources are fetched; a text source is indexed as soon as it is written."
        )
    _queue_fetch(source)
    return source


def knowledge_source_fetch(*, source_id: str, message_id: str) -> FetchOutcome | None:
    """One fetch of an API source, recorded on it: the passages of a good fetch replace the old ones; a failed fetch
    records its error and keeps the passages of the last good one. None when there is no such API source.

    `message_id` is the fetch's `webhook-id`, the same on every retry of this fetch."""
    source = KnowledgeSource.objects.filter(pk=source_id, kind=KnowledgeSource.Kind.API).first()
    if source is None:
        return None
    started = timezone.now()
    outcome = fetch_source(
        project_id=source.project_id,
        url=source.url,
        response_config=source.response,
        signing_secrets=signing_secrets_valid(project=source.project, purpose=SigningSecret.Purpose.TOOL_SIGNING),
        message_id=message_id,
    )
    with transaction.atomic():
        current = KnowledgeSource.objects.select_for_update().filter(pk=source_id).first()
        if current is None:
            return outcome  # deleted while fetching
        stale = (
            (current.last_fetch_at is not None and current.last_fetch_at > started)  # a later fetch finished first
            or current.url != source.url
            or current.response != source.response  # changed while fetching: a fetch of the new one is queued
        )
        changes: dict[str, Any] = {"fetch_queued_at": None}
        if not stale:
            changes.update(
                last_fetch_at=timezone.now(),
                last_fetch_status=(
                    KnowledgeSource.FetchStatus.SUCCEEDED if outcome.ok else KnowledgeSource.FetchStatus.FAILED
                ),
                last_fetch_error=outcome.error_code,
                last_fetch_http_status=outcome.http_status,
            )
            if outcome.ok and (outcome.content != current.content or current.index_version != TERMS_VERSION):
                changes["content"] = outcome.content
        if "content" in changes:
            indexed = _content_indexed(current, outcome.content)
            if not indexed:  # recorded as a failed fetch; the last good passages stay
                changes.update(content=current.content, last_fetch_status=KnowledgeSource.FetchStatus.FAILED)
                changes["last_fetch_error"] = "unindexable"
        KnowledgeSource.objects.filter(pk=source_id).update(**changes)
    return outcome


def _content_indexed(source: KnowledgeSource, content: str) -> bool:
    """The fetched content's passages in place of the old ones, in a savepoint: False (and nothing changed) when the
    database refuses them, so the fetch is recorded as failed instead of lost with its transaction."""
    previous = source.content
    source.content = content
    try:
        with transaction.atomic():
            _reindex(source)
    except DataError:
        logger.warning("knowledge source %s: its fetched content could not be indexed", source.pk, exc_info=True)
        source.content = previous
        return False
    return True


def knowledge_refresh_due(*, limit: int = 200) -> dict[str, int]:
    """Beat's pass: queue a fetch of every API source whose time has come (each claimed by moving its next time, so
    two passes never queue it twice), and index again sources indexed by an older version of the search terms."""
    now = timezone.now()
    queued = 0
    due = (
        KnowledgeSource.objects.filter(kind=KnowledgeSource.Kind.API, next_fetch_at__lte=now)
        .order_by("next_fetch_at")
        .only("id", "refresh_minutes")[:limit]
    )
    for source in due:
        minutes = source.refresh_minutes or DEFAULT_REFRESH_MINUTES
        with transaction.atomic():
            moved = KnowledgeSource.objects.filter(pk=source.pk, next_fetch_at__lte=now).update(
                next_fetch_at=now + timedelta(minutes=minutes)
            )
            if moved and _queue_fetch(source):
                queued += 1
    reindexed = 0
    for source in KnowledgeSource.objects.exclude(index_version=TERMS_VERSION).order_by("pk")[:REINDEX_BATCH]:
        with transaction.atomic():
            locked = KnowledgeSource.objects.select_for_update().get(pk=source.pk)
            _reindex(locked)
            reindexed += 1
    return {"queued": queued, "reindexed": reindexed}


def agent_restore_version(*, agent: Agent, version: AgentVersion) -> Agent:
    """The draft becomes version `version`'s config again (publish to make it live). HTTP tools belong to the
    project, not to a version: their definitions are not restored, and the draft grants them as they are now."""
    if version.agent_id != agent.pk:
        raise Unprocessable("invalid_request", "That version belongs to another agent.")
    config = validate_config(version.config)
    now = timezone.now()
    Agent.objects.filter(pk=agent.pk).update(config=config, updated_at=now)
    agent.config, agent.updated_at = config, now
    return agent
