from django.urls import path

from runs import apis

urlpatterns = [
    path("runs", apis.RunListCreateApi.as_view()),
    path("runs/<oid:run_id>", apis.RunDetailApi.as_view()),
    path("runs/<oid:run_id>/steps", apis.RunStepsApi.as_view()),
    path("runs/<oid:run_id>/events", apis.RunEventsApi.as_view()),
    path("runs/<oid:run_id>/submit_tool_outputs", apis.RunSubmitToolOutputsApi.as_view()),
    path("runs/<oid:run_id>/approve_tool_calls", apis.RunApproveToolCallsApi.as_view()),
    path("runs/<oid:run_id>/cancel", apis.RunCancelApi.as_view()),
]
