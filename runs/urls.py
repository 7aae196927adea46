from django.urls import path

from runs.apis import actions, create, reads

urlpatterns = [
    path("runs", create.RunListCreateApi.as_view()),
    path("runs/<oid:run_id>", reads.RunDetailApi.as_view()),
    path("runs/<oid:run_id>/steps", reads.RunStepsApi.as_view()),
    path("runs/<oid:run_id>/events", reads.RunEventsApi.as_view()),
    path("runs/<oid:run_id>/submit_tool_outputs", actions.RunSubmitToolOutputsApi.as_view()),
    path("runs/<oid:run_id>/approve_tool_calls", actions.RunApproveToolCallsApi.as_view()),
    path("runs/<oid:run_id>/cancel", actions.RunCancelApi.as_view()),
]
