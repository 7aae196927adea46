from django.urls import path

from hooks import apis

urlpatterns = [
    path("webhook_endpoints", apis.EndpointListCreateApi.as_view()),
    path("webhook_endpoints/<oid:endpoint_id>", apis.EndpointDetailApi.as_view()),
    path("webhook_endpoints/<oid:endpoint_id>/rotate_secret", apis.EndpointRotateSecretApi.as_view()),
    path("webhook_endpoints/<oid:endpoint_id>/deliveries", apis.DeliveryListApi.as_view()),
    path(
        "webhook_endpoints/<oid:endpoint_id>/deliveries/<oid:delivery_id>/redeliver",
        apis.DeliveryRedeliverApi.as_view(),
    ),
]
