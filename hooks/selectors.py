"""Reads for webhooks. Every read takes the project: another project's endpoint or delivery is a 404."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from hooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from kagent.errors import NotFound
from kagent.models import Project

ATTEMPTS_SHOWN = 20


def endpoint_list(*, project: Project) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(project=project)


def endpoint_get(*, project: Project, endpoint_id: str) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.objects.filter(project=project, pk=endpoint_id).first()
    if endpoint is None:
        raise NotFound("No webhook endpoint with that id in this project.")
    return endpoint


def _with_log(deliveries: QuerySet[WebhookDelivery]) -> QuerySet[WebhookDelivery]:
    return deliveries.select_related("event").prefetch_related(
        Prefetch(
            "attempt_log",
            queryset=WebhookAttempt.objects.order_by("-number")[:ATTEMPTS_SHOWN],
            to_attr="attempts_shown",
        )
    )


def delivery_list(*, endpoint: WebhookEndpoint, status: str | None = None) -> QuerySet[WebhookDelivery]:
    """An endpoint's deliveries with their log (the latest attempts first)."""
    deliveries = WebhookDelivery.objects.filter(endpoint=endpoint, project_id=endpoint.project_id)
    if status is not None:
        deliveries = deliveries.filter(status=status)
    return _with_log(deliveries)


def delivery_get(*, endpoint: WebhookEndpoint, delivery_id: str) -> WebhookDelivery:
    delivery = _with_log(
        WebhookDelivery.objects.filter(endpoint=endpoint, project_id=endpoint.project_id, pk=delivery_id)
    ).first()
    if delivery is None:
        raise NotFound("No delivery with that id for this endpoint.")
    return delivery
