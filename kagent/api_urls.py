"""Every `/v1` route, gathered from the apps that own them."""

from django.urls import include, path

urlpatterns = [
    path("", include("agents.urls")),
    path("", include("tools.urls")),
    path("", include("runs.urls")),
]
