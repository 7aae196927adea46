from django.urls import path

from agents import apis

urlpatterns = [
    path("agents", apis.AgentListCreateApi.as_view()),
    path("agents/<str:agent_id>", apis.AgentDetailApi.as_view()),
    path("agents/<str:agent_id>/publish", apis.AgentPublishApi.as_view()),
    path("agents/<str:agent_id>/versions", apis.AgentVersionListApi.as_view()),
    path("agents/<str:agent_id>/versions/<int:number>", apis.AgentVersionDetailApi.as_view()),
]
