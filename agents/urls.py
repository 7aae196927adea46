from django.urls import path

from agents import apis

urlpatterns = [
    path("agents", apis.AgentListCreateApi.as_view()),
    path("agents/<oid:agent_id>", apis.AgentDetailApi.as_view()),
    path("agents/<oid:agent_id>/greeting", apis.AgentGreetingApi.as_view()),
    path("agents/<oid:agent_id>/rollback", apis.AgentRollbackApi.as_view()),
    path("agents/<oid:agent_id>/versions", apis.AgentVersionListApi.as_view()),
    path("agents/<oid:agent_id>/versions/<int:number>", apis.AgentVersionDetailApi.as_view()),
    path("agents/<oid:agent_id>/versions/<int:number>/diff/<int:other>", apis.AgentVersionDiffApi.as_view()),
    path("agents/<oid:agent_id>/versions/<int:number>/restore", apis.AgentVersionRestoreApi.as_view()),
    path("knowledge_sources", apis.KnowledgeSourceListCreateApi.as_view()),
    path("knowledge_sources/<oid:source_id>", apis.KnowledgeSourceDetailApi.as_view()),
    path("knowledge_sources/<oid:source_id>/refresh", apis.KnowledgeSourceRefreshApi.as_view()),
]
