"""Knowledge sources (`/knowledge/`): what agents find with `search_knowledge`. A text source is Markdown written
here, split into passages as soon as it is saved; an API source is JSON fetched from the business's URL on a
schedule, its rows and fields made into passages. Add one (for one agent or the whole project), change it, fetch an
API source now, delete it; see how it was split. The same inputs and services as `/v1/knowledge_sources`. Like
agents and tools, every member of the project can change them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from agents import selectors, services
from agents.apis import KNOWLEDGE_SOURCE_WRITE, KnowledgeSourceWrite, knowledge_source_create, knowledge_source_update
from agents.models import KnowledgeSource
from dashboard.access import MemberRequest, member_page
from dashboard.problems import Problems, problems_from, refuse_unstorable
from dashboard.tool_form import number_or_text, text_pairs
from kagent import throttle
from kagent.errors import ApiError, NotFound

FIELDS = (
    "$.agent",
    "$.title",
    "$.kind",
    "$.content",
    "$.url",
    "$.response",
    "$.response.items_path",
    "$.response.fields",
    "$.response.max_items",
    "$.refresh_minutes",
    "$.searchable",
)
PASSAGES_SHOWN = 50
FIELD_PREFIX = "$.response"  # the names of the API source's field rows (dashboard/_field_row.html)


@dataclass
class SourceValues:
    """What the form's fields hold, as typed."""

    title: str = ""
    agent: str = ""  # "": every agent of the project
    kind: str = KnowledgeSource.Kind.TEXT
    content: str = ""
    url: str = ""
    items_path: str = ""
    fields: list[tuple[str, str]] = field(default_factory=list)
    max_items: str = ""
    refresh_minutes: str = ""
    searchable: bool = True

    @classmethod
    def of(cls, source: KnowledgeSource) -> SourceValues:
        response = source.response or {}
        return cls(
            title=source.title,
            agent=source.agent_id or "",
            kind=source.kind,
            content=source.content if source.kind == KnowledgeSource.Kind.TEXT else "",
            url=source.url,
            items_path=str(response.get("items_path", "")),
            fields=[(str(f.get("path", "")), str(f.get("label", ""))) for f in response.get("fields", [])],
            max_items=str(response.get("max_items", "")),
            refresh_minutes=str(source.refresh_minutes or ""),
            searchable=source.searchable,
        )

    @classmethod
    def posted(cls, request: HttpRequest) -> SourceValues:
        post = request.POST
        return cls(
            title=post.get("$.title", ""),
            agent=post.get("$.agent", ""),
            kind=post.get("$.kind", KnowledgeSource.Kind.TEXT),
            content=post.get("$.content", "").replace("\r\n", "\n"),
            url=post.get("$.url", "").strip(),
            items_path=post.get("$.response.items_path", "").strip(),
            fields=text_pairs(post, f"{FIELD_PREFIX}.fields.path", f"{FIELD_PREFIX}.fields.label"),
            max_items=post.get("$.response.max_items", "").strip(),
            refresh_minutes=post.get("$.refresh_minutes", "").strip(),
            searchable=post.get("$.searchable") == "on",
        )

    def body(self, kind: str, *, create: bool) -> dict[str, Any]:
        """The API's write body for a source of `kind`: only that kind's fields (the others are left as typed)."""
        body: dict[str, Any] = {"title": self.title, "searchable": self.searchable}
        if create:
            body.update(kind=self.kind, agent=self.agent or None)
        if kind != KnowledgeSource.Kind.API:  # text, or a kind the API refuses by name
            body["content"] = self.content
            return body
        response: dict[str, Any] = {"fields": [{"path": path, "label": label} for path, label in self.fields]}
        if self.items_path:
            response["items_path"] = self.items_path
        if self.max_items:
            response["max_items"] = number_or_text(self.max_items)
        body.update(url=self.url, response=response)
        if self.refresh_minutes:
            body["refresh_minutes"] = number_or_text(self.refresh_minutes)
        return body


def _form_context(request: MemberRequest, values: SourceValues, problems: Problems) -> dict[str, Any]:
    return {
        "values": values,
        "problems": problems,
        "agents": selectors.agent_list(project=request.project).order_by("name"),
        "field_prefix": FIELD_PREFIX,
    }


@member_page("GET", "POST", checks_unstorable=True)
def knowledge_list(request: MemberRequest) -> HttpResponse:
    values, problems = SourceValues(), Problems()
    if request.method == "POST":
        values = SourceValues.posted(request)
        try:
            refuse_unstorable(request.POST)
            body = KNOWLEDGE_SOURCE_WRITE.parse(values.body(values.kind, create=True))
            if body.kind == KnowledgeSource.Kind.API:  # fetched right after it is added
                throttle.dashboard_action(request.project.pk, request.user.pk)
            source = knowledge_source_create(request.project, body)
        except NotFound as exc:  # the agent it names: another project's, deleted, or none
            problems = Problems()
            problems.add("$.agent", exc.message)
        except ApiError as exc:
            problems = problems_from(exc, FIELDS)
        else:
            messages.success(request, _saved_message(source, created=True))
            return redirect("dashboard:knowledge-source", source_id=source.pk)
    context = _form_context(request, values, problems)
    context["sources"] = (
        selectors.knowledge_source_list(project=request.project).select_related("agent").order_by("title", "pk")
    )
    return render(request, "dashboard/knowledge.html", context, status=422 if problems else 200)


def _saved_message(source: KnowledgeSource, *, created: bool) -> str:
    if source.kind == KnowledgeSource.Kind.API and source.fetch_queued_at:
        return "Saved. It is being fetched now: reload this page in a moment to see its passages."
    count = source.passage_count
    return f"{'Added' if created else 'Saved'}: {count} passage{'' if count == 1 else 's'}."


def _fetched_again(source: KnowledgeSource, body: KnowledgeSourceWrite) -> bool:
    """Whether saving `body` queues a fetch of `source`, as services.knowledge_source_update decides (a changed URL
    or response shaping): it goes out like "Fetch now" and counts with it."""
    return source.kind == KnowledgeSource.Kind.API and (
        (body.url is not None and body.url != source.url)
        or (body.response is not None and body.response != source.response)
    )


@member_page("GET", "POST", checks_unstorable=True)
def knowledge_source(request: MemberRequest, source_id: str) -> HttpResponse:
    source = selectors.knowledge_source_get(project=request.project, source_id=source_id)
    values, problems = SourceValues.of(source), Problems()
    if request.method == "POST":
        values = SourceValues.posted(request)
        values.kind, values.agent = source.kind, source.agent_id or ""  # set on create only
        try:
            refuse_unstorable(request.POST)
            body = KNOWLEDGE_SOURCE_WRITE.parse(values.body(source.kind, create=False), partial=True)
            if _fetched_again(source, body):
                throttle.dashboard_action(request.project.pk, request.user.pk)
            source = knowledge_source_update(source, body)
        except ApiError as exc:
            problems = problems_from(exc, FIELDS)
        else:
            messages.success(request, _saved_message(source, created=False))
            return redirect("dashboard:knowledge-source", source_id=source.pk)
    context = _form_context(request, values, problems)
    context.update(source=source, passages=source.passages.order_by("position")[:PASSAGES_SHOWN])
    return render(request, "dashboard/knowledge_source.html", context, status=422 if problems else 200)


@member_page("POST")
def knowledge_refresh(request: MemberRequest, source_id: str) -> HttpResponse:
    source = selectors.knowledge_source_get(project=request.project, source_id=source_id)
    try:
        throttle.dashboard_action(request.project.pk, request.user.pk)
        services.knowledge_source_refresh(source=source)
    except ApiError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Fetching it now: reload this page in a moment to see the outcome.")
    return redirect("dashboard:knowledge-source", source_id=source.pk)


@member_page("POST")
def knowledge_delete(request: MemberRequest, source_id: str) -> HttpResponse:
    source = selectors.knowledge_source_get(project=request.project, source_id=source_id)
    services.knowledge_source_delete(source=source)
    messages.success(request, f"Deleted {source.title}: agents no longer find its passages.")
    return redirect("dashboard:knowledge")
