"""Every `/v1` route, gathered from the apps that own them."""

from django.urls import include, path

from kagent import apis

urlpatterns = [
    path("secrets", apis.SecretListApi.as_view()),
    path("secrets/<name:name>", apis.SecretDetailApi.as_view()),
    path("tool_signing_secret", apis.ToolSigningSecretApi.as_view()),
    path("tool_signing_secret/rotate", apis.ToolSigningSecretRotateApi.as_view()),
    path("end_user_secret", apis.EndUserSecretApi.as_view()),
    path("end_user_secret/rotate", apis.EndUserSecretRotateApi.as_view()),
    path("egress_events", apis.EgressEventListApi.as_view()),
    path("", include("agents.urls")),
    path("", include("tools.urls")),
    path("", include("conversations.urls")),
    path("", include("runs.urls")),
    path("", include("desk.urls")),
    path("", include("checks.urls")),
    path("", include("hooks.urls")),
]
