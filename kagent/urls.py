from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView

from kagent import (
    converters,  # noqa: F401  (registers `oid` and `name`)
    errors,
)
from kagent.health import healthz

handler404 = "kagent.errors.handler404"
handler500 = "kagent.errors.handler500"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("v1/openapi.json", SpectacularJSONAPIView.as_view(), name="openapi"),
    path("v1/docs", SpectacularSwaggerView.as_view(url_name="openapi"), name="api-docs"),
    path("v1/", include("kagent.api_urls")),
    # Anything else under /v1 is a JSON 404, in DEBUG too (Django's debug 404 page is HTML).
    # linear: anchored, a literal then anything
    re_path(r"^v1(?:/.*)?$", errors.api_not_found),
    path("", include("dashboard.urls")),
]
