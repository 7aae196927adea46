"""`/v1/webhook_endpoints…`: one API class per operation; each parses its body, calls one service or selector,
renders. Secret keys only (a publishable key is refused, as everywhere outside sessions and runs)."""

from __future__ import annotations

from dataclasses import dataclass

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from hooks import deliveries, selectors, services
from hooks.models import EVENT_TYPES, WebhookDelivery
from hooks.resources import WEBHOOK_DELIVERY, WEBHOOK_ENDPOINT, WEBHOOK_ENDPOINT_WITH_SECRET, with_secret
from kagent.api import ProjectApi, paginate, param_choice
from kagent.inputs import Input
from kagent.openapi import list_of


@dataclass(frozen=True)
class EndpointWrite:
    url: str
    event_types: list[str]
    description: str
    enabled: bool


ENDPOINT_WRITE = Input(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["url", "event_types"],
        "properties": {
            "url": {
                "type": "string",
                "minLength": 1,
                "maxLength": 2048,
                "description": "https://host[:port]/path, port 443 or 8443, no user information",
                "x-code": "invalid_url",
                "x-message": "Give the endpoint's URL: an https:// address of at most 2048 characters.",
            },
            "event_types": {
                "type": "array",
                "minItems": 1,
                "maxItems": len(EVENT_TYPES),
                "uniqueItems": True,
                "items": {"enum": list(EVENT_TYPES)},
                "x-code": "invalid_event_types",
                "x-message": f"Choose at least one event type, each once: {', '.join(EVENT_TYPES)}.",
            },
            "description": {
                "type": "string",
                "maxLength": 500,
                "default": "",
                "x-message": "The description can be at most 500 characters long.",
            },
            "enabled": {"type": "boolean", "default": True, "x-message": "enabled is true or false."},
        },
    },
    EndpointWrite,
)


class EndpointListCreateApi(ProjectApi):
    @extend_schema(operation_id="webhook_endpoints_list", responses=list_of(WEBHOOK_ENDPOINT.ref))
    def get(self, request: Request) -> Response:
        return Response(paginate(request, selectors.endpoint_list(project=self.project), WEBHOOK_ENDPOINT.render))

    @extend_schema(
        operation_id="webhook_endpoints_create",
        request=ENDPOINT_WRITE.body,
        responses={201: WEBHOOK_ENDPOINT_WITH_SECRET.ref},
        description="The answer holds the endpoint's secret (whsec_…), shown only now: verify each delivery's "
        "webhook-signature with it. Events: " + ", ".join(EVENT_TYPES) + ". Each is POSTed as "
        '{"id": "evt_…", "type", "created_at", "data"}, with webhook-id = the event id on every attempt.',
    )
    def post(self, request: Request) -> Response:
        body = ENDPOINT_WRITE.parse(request.data)
        endpoint, secret = services.endpoint_create(
            project=self.project,
            url=body.url,
            event_types=body.event_types,
            description=body.description,
            enabled=body.enabled,
        )
        return Response(with_secret(endpoint, secret), status=status.HTTP_201_CREATED)


class EndpointDetailApi(ProjectApi):
    @extend_schema(operation_id="webhook_endpoints_retrieve", responses={200: WEBHOOK_ENDPOINT.ref})
    def get(self, request: Request, endpoint_id: str) -> Response:
        return Response(WEBHOOK_ENDPOINT.render(selectors.endpoint_get(project=self.project, endpoint_id=endpoint_id)))

    @extend_schema(
        operation_id="webhook_endpoints_update",
        request=ENDPOINT_WRITE.body,
        responses={200: WEBHOOK_ENDPOINT.ref},
        description="Change url, event_types or description, or switch the endpoint off and on (enabling a "
        "disabled endpoint clears its reason; redeliver what failed meanwhile).",
    )
    def patch(self, request: Request, endpoint_id: str) -> Response:
        endpoint = selectors.endpoint_get(project=self.project, endpoint_id=endpoint_id)
        body = ENDPOINT_WRITE.parse(request.data, partial=True)
        endpoint = services.endpoint_update(
            endpoint=endpoint,
            url=body.url,
            event_types=body.event_types,
            description=body.description,
            enabled=body.enabled,
        )
        return Response(WEBHOOK_ENDPOINT.render(endpoint))

    @extend_schema(operation_id="webhook_endpoints_delete", request=None, responses={200: {"type": "object"}})
    def delete(self, request: Request, endpoint_id: str) -> Response:
        endpoint = selectors.endpoint_get(project=self.project, endpoint_id=endpoint_id)
        services.endpoint_delete(endpoint=endpoint)
        return Response({"id": endpoint_id, "object": "webhook_endpoint", "deleted": True})


class EndpointRotateSecretApi(ProjectApi):
    @extend_schema(
        operation_id="webhook_endpoints_rotate_secret",
        request=None,
        responses={200: WEBHOOK_ENDPOINT_WITH_SECRET.ref},
        description="A new secret, shown only now. For 24 hours deliveries carry two signatures (the new secret's "
        "and the previous one's), so the receiver can switch without missing one.",
    )
    def post(self, request: Request, endpoint_id: str) -> Response:
        endpoint = selectors.endpoint_get(project=self.project, endpoint_id=endpoint_id)
        endpoint, secret = services.endpoint_rotate_secret(endpoint=endpoint)
        return Response(with_secret(endpoint, secret))


class DeliveryListApi(ProjectApi):
    @extend_schema(
        operation_id="webhook_deliveries_list",
        parameters=[OpenApiParameter("status", str, enum=[s.value for s in WebhookDelivery.Status])],
        responses=list_of(WEBHOOK_DELIVERY.ref),
        description="The endpoint's deliveries, newest first, each with its log of attempts.",
    )
    def get(self, request: Request, endpoint_id: str) -> Response:
        endpoint = selectors.endpoint_get(project=self.project, endpoint_id=endpoint_id)
        status_filter = param_choice(request.query_params, "status", [s.value for s in WebhookDelivery.Status])
        deliveries = selectors.delivery_list(endpoint=endpoint, status=status_filter)
        return Response(paginate(request, deliveries, WEBHOOK_DELIVERY.render))


class DeliveryRedeliverApi(ProjectApi):
    @extend_schema(
        operation_id="webhook_deliveries_redeliver",
        request=None,
        responses={202: WEBHOOK_DELIVERY.ref},
        description="Send the event again now, with the same webhook-id (one attempt). 409 endpoint_disabled, "
        "delivery_in_progress.",
    )
    def post(self, request: Request, endpoint_id: str, delivery_id: str) -> Response:
        endpoint = selectors.endpoint_get(project=self.project, endpoint_id=endpoint_id)
        delivery = selectors.delivery_get(endpoint=endpoint, delivery_id=delivery_id)
        delivery = deliveries.delivery_redeliver(delivery=delivery)
        return Response(
            WEBHOOK_DELIVERY.render(selectors.delivery_get(endpoint=endpoint, delivery_id=delivery.pk)),
            status=status.HTTP_202_ACCEPTED,
        )
