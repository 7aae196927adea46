"""Webhook endpoints (`/settings/webhooks/`): add one (its secret shown once), rotate the secret, switch it off and on,
delete it; each endpoint's deliveries with their log of attempts, and redelivery. The same inputs and services as
`/v1/webhook_endpoints`. Owners and admins change endpoints; members look."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from dashboard.access import MemberRequest, manager_required, member_page
from dashboard.problems import Problems, problems_from
from hooks import deliveries, selectors, services
from hooks.apis import ENDPOINT_WRITE
from hooks.models import EVENT_TYPES, WebhookEndpoint
from kagent import throttle
from kagent.errors import ApiError

FIELDS = ("$.url", "$.event_types", "$.description")
DELIVERIES_SHOWN = 50


def _event_choices(checked: list[str]) -> list[dict[str, Any]]:
    return [{"name": name, "checked": name in checked} for name in EVENT_TYPES]


@never_cache
@member_page("GET", "POST")
def webhook_list(request: MemberRequest) -> HttpResponse:
    problems = Problems()
    typed: dict[str, Any] = {"url": "", "description": "", "event_types": list(EVENT_TYPES)}
    created: tuple[WebhookEndpoint, str] | None = None
    if request.method == "POST":
        manager_required(request)
        typed = {
            "url": request.POST.get("$.url", "").strip(),
            "description": request.POST.get("$.description", ""),
            "event_types": request.POST.getlist("$.event_types"),
        }
        try:
            body = ENDPOINT_WRITE.parse(typed)
            created = services.endpoint_create(
                project=request.project, url=body.url, event_types=body.event_types, description=body.description
            )
        except ApiError as exc:
            problems = problems_from(exc, FIELDS)
        else:
            typed = {"url": "", "description": "", "event_types": list(EVENT_TYPES)}
    context = {
        "endpoints": selectors.endpoint_list(project=request.project).order_by("-created_at"),
        "problems": problems,
        "typed": typed,
        "choices": _event_choices(typed["event_types"]),
        "created": {"endpoint": created[0], "secret": created[1]} if created else None,
    }
    return render(request, "dashboard/webhooks.html", context, status=422 if problems else 200)


def _detail(request: MemberRequest, endpoint: WebhookEndpoint, secret: str | None = None) -> HttpResponse:
    deliveries = list(selectors.delivery_list(endpoint=endpoint).order_by("-pk")[:DELIVERIES_SHOWN])
    context = {"endpoint": endpoint, "deliveries": deliveries, "secret": secret}
    return render(request, "dashboard/webhook.html", context)


@never_cache
@member_page("GET")
def webhook_detail(request: MemberRequest, endpoint_id: str) -> HttpResponse:
    return _detail(request, selectors.endpoint_get(project=request.project, endpoint_id=endpoint_id))


@never_cache
@member_page("POST")
def webhook_rotate(request: MemberRequest, endpoint_id: str) -> HttpResponse:
    manager_required(request)
    endpoint = selectors.endpoint_get(project=request.project, endpoint_id=endpoint_id)
    endpoint, secret = services.endpoint_rotate_secret(endpoint=endpoint)
    messages.success(
        request, "Rotated. The previous secret keeps signing for 24 hours: deploy the new one before then."
    )
    return _detail(request, endpoint, secret)


@member_page("POST")
def webhook_enabled(request: MemberRequest, endpoint_id: str) -> HttpResponse:
    """Switch an endpoint off, or on again (which clears why it was disabled)."""
    manager_required(request)
    endpoint = selectors.endpoint_get(project=request.project, endpoint_id=endpoint_id)
    enabled = request.POST.get("enabled") == "true"
    services.endpoint_update(endpoint=endpoint, enabled=enabled)
    messages.success(
        request,
        "Enabled. Redeliver what failed while it was off." if enabled else "Disabled. Nothing is sent to it now.",
    )
    return redirect("dashboard:webhook", endpoint_id=endpoint.pk)


@member_page("POST")
def webhook_delete(request: MemberRequest, endpoint_id: str) -> HttpResponse:
    manager_required(request)
    endpoint = selectors.endpoint_get(project=request.project, endpoint_id=endpoint_id)
    services.endpoint_delete(endpoint=endpoint)
    messages.success(request, f"Deleted the endpoint {endpoint.url}.")
    return redirect("dashboard:webhooks")


@member_page("POST")
def webhook_redeliver(request: MemberRequest, endpoint_id: str, delivery_id: str) -> HttpResponse:
    manager_required(request)
    endpoint = selectors.endpoint_get(project=request.project, endpoint_id=endpoint_id)
    delivery = selectors.delivery_get(endpoint=endpoint, delivery_id=delivery_id)
    try:
        throttle.dashboard_action(request.project.pk, request.user.pk)
        deliveries.delivery_redeliver(delivery=delivery)
    except ApiError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Sending {delivery.event_id} again, with the same webhook-id.")
    return redirect("dashboard:webhook", endpoint_id=endpoint.pk)


@member_page("POST")
def webhook_test(request: MemberRequest, endpoint_id: str) -> HttpResponse:
    """Send test event: a signed `ping`, sent now, once, in the endpoint's delivery log."""
    manager_required(request)
    endpoint = selectors.endpoint_get(project=request.project, endpoint_id=endpoint_id)
    try:
        throttle.dashboard_action(request.project.pk, request.user.pk)
        delivery = deliveries.endpoint_send_test(endpoint=endpoint)
    except ApiError as exc:
        messages.error(request, exc.message)
    else:
        if delivery.status == delivery.Status.SUCCEEDED:
            messages.success(
                request, f"Test event delivered (HTTP {delivery.last_status_code}), signed: see the log below."
            )
        else:
            got = f"HTTP {delivery.last_status_code}" if delivery.last_status_code else delivery.last_error_code
            messages.error(request, f"The test event was not accepted ({got}): see the log below.")
    return redirect("dashboard:webhook", endpoint_id=endpoint.pk)
