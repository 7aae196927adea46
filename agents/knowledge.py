"""`/v1/knowledge_sources`: text the agents can search with `search_knowledge`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import KnowledgeSource
from agents.selectors import agent_get
from kagent.api import ProjectApi, paginate, request_object, unix
from kagent.errors import NotFound, Unprocessable
from kagent.models import Project
from kagent.openapi import TIMESTAMP, component, json_body, list_of

MAX_CONTENT = 100_000

KNOWLEDGE_SCHEMA = component(
    "KnowledgeSource",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "knowledge_source"},
            "agent": {"type": ["string", "null"], "description": "null: every agent of the project"},
            "title": {"type": "string"},
            "kind": {"enum": ["text"]},
            "content": {"type": "string"},
            "searchable": {"type": "boolean"},
            "updated_at": TIMESTAMP,
        },
    },
)


def render_source(source: KnowledgeSource) -> dict[str, Any]:
    return {
        "id": source.pk,
        "object": "knowledge_source",
        "agent": source.agent_id,
        "title": source.title,
        "kind": source.kind,
        "content": source.content,
        "searchable": source.searchable,
        "updated_at": unix(source.updated_at),
    }


def knowledge_source_create(*, project: Project, data: dict[str, Any]) -> KnowledgeSource:
    unknown = sorted(set(data) - {"agent", "title", "kind", "content", "searchable"})
    if unknown:
        raise Unprocessable("invalid_request", f"Unknown field(s): {', '.join(unknown)[:200]}.")
    kind = data.get("kind", "text")
    if kind == "api":
        raise Unprocessable(
            "not_supported", "API knowledge sources are not available yet; add the content as a text source."
        )
    if kind != "text":
        raise Unprocessable("invalid_request", "kind is text.")
    title, content = data.get("title"), data.get("content")
    if not isinstance(title, str) or not title.strip() or len(title) > 200:
        raise Unprocessable("invalid_request", "title is a non-empty string of at most 200 characters.")
    if not isinstance(content, str) or not content.strip() or len(content) > MAX_CONTENT:
        raise Unprocessable("invalid_request", f"content is a non-empty string of at most {MAX_CONTENT} characters.")
    searchable = data.get("searchable", True)
    if not isinstance(searchable, bool):
        raise Unprocessable("invalid_request", "searchable is true or false.")
    agent = agent_get(project=project, agent_id=data["agent"]) if data.get("agent") is not None else None
    return KnowledgeSource.objects.create(
        project=project, agent=agent, title=title.strip(), kind=kind, content=content, searchable=searchable
    )


class KnowledgeSourceListCreateApi(ProjectApi):
    @extend_schema(operation_id="knowledge_sources_list", responses=list_of(KNOWLEDGE_SCHEMA))
    def get(self, request: Request) -> Response:
        return Response(paginate(request, KnowledgeSource.objects.filter(project=self.project), render_source))

    @extend_schema(
        operation_id="knowledge_sources_create",
        request=json_body({"type": "object"}),
        responses={201: KNOWLEDGE_SCHEMA},
    )
    def post(self, request: Request) -> Response:
        source = knowledge_source_create(project=self.project, data=request_object(request))
        return Response(render_source(source), status=status.HTTP_201_CREATED)


class KnowledgeSourceDetailApi(ProjectApi):
    @extend_schema(operation_id="knowledge_sources_retrieve", responses={200: KNOWLEDGE_SCHEMA})
    def get(self, request: Request, source_id: str) -> Response:
        source = KnowledgeSource.objects.filter(project=self.project, pk=source_id).first()
        if source is None:
            raise NotFound("No knowledge source with that id in this project.")
        return Response(render_source(source))

    @extend_schema(operation_id="knowledge_sources_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, source_id: str) -> Response:
        deleted, _ = KnowledgeSource.objects.filter(project=self.project, pk=source_id).delete()
        if not deleted:
            raise NotFound("No knowledge source with that id in this project.")
        return Response({"id": source_id, "object": "knowledge_source", "deleted": True})
