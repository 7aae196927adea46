from django.urls import path

from checks import apis

urlpatterns = [
    path("agents/<oid:agent_id>/publish", apis.AgentPublishApi.as_view()),
    path("agents/<oid:agent_id>/checks", apis.AgentCheckListCreateApi.as_view()),
    path("agents/<oid:agent_id>/checks/run", apis.AgentCheckRunCreateApi.as_view()),
    path("agents/<oid:agent_id>/checks/<oid:check_id>", apis.AgentCheckDetailApi.as_view()),
    path("agents/<oid:agent_id>/check_runs/<oid:check_run_id>", apis.AgentCheckRunDetailApi.as_view()),
    path("agents/<oid:agent_id>/versions/<int:number>/metrics", apis.AgentVersionMetricsApi.as_view()),
]
