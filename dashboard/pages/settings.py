"""Settings: secrets (write-only), the signing secrets (reveal, rotate), members and their invitations, the egress
log (webhook endpoints are in `webhooks.py`). Owners and admins change keys, secrets and members; members look."""

from __future__ import annotations

import re
from typing import Any

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.cache import never_cache

from dashboard.access import MemberRequest, manager_required, member_page
from dashboard.links import public_base_url
from dashboard.pages.runs import next_page_query
from dashboard.problems import Problems, problems_from
from kagent import invitations, secrets, selectors, services
from kagent.apis import SECRET_WRITE, egress_filters
from kagent.errors import ApiError
from kagent.models import EgressEvent, Membership, SigningSecret
from kagent.resources import EGRESS_EVENT

SECRET_FIELDS = ("$.name", "$.value", "$.allowed_hosts")


def _hosts(text: str) -> list[str]:
    """Allowed hosts as typed: separated by commas, spaces or lines."""
    return [host for host in re.split(r"[\s,]+", text.strip()) if host]  # linear: one class, repeated


@never_cache
@member_page("GET", "POST")
def secret_list(request: MemberRequest) -> HttpResponse:
    problems = Problems()
    typed = {"name": "", "allowed_hosts": ""}
    if request.method == "POST":
        manager_required(request)
        typed = {
            "name": request.POST.get("$.name", "").strip(),
            "allowed_hosts": request.POST.get("$.allowed_hosts", ""),
        }
        try:
            body = SECRET_WRITE.parse(
                {"value": request.POST.get("$.value", ""), "allowed_hosts": _hosts(typed["allowed_hosts"])}
            )
            secret, created = secrets.secret_put(
                project=request.project, name=typed["name"], value=body.value, allowed_hosts=body.allowed_hosts
            )
        except ApiError as exc:
            problems = problems_from(exc, SECRET_FIELDS)
        else:
            messages.success(
                request, f"{'Added' if created else 'Replaced'} {secret.name}. Its value can't be shown again."
            )
            return redirect("dashboard:secrets")
    context = {
        "secrets": secrets.secret_list(project=request.project).order_by("name"),
        "problems": problems,
        "typed": typed,
    }
    return render(request, "dashboard/secrets.html", context, status=422 if problems else 200)


@member_page("POST")
def secret_delete(request: MemberRequest, name: str) -> HttpResponse:
    manager_required(request)
    secrets.secret_delete(project=request.project, name=name)
    messages.success(request, f"Deleted {name}. Tools that send it fail closed until it is added again.")
    return redirect("dashboard:secrets")


SIGNING = {
    "tool": (
        SigningSecret.Purpose.TOOL_SIGNING,
        "Tool signing secret",
        "Every call to your HTTP tools is signed with it (Standard Webhooks headers webhook-id, webhook-timestamp, "
        "webhook-signature). Verify the signature in your endpoint with any Standard Webhooks library.",
    ),
    "end-user": (
        SigningSecret.Purpose.END_USER,
        "End-user token secret",
        "Your server signs end_user_token JWTs (HS256, sub = your customer's id, exp required) with it, so apps with "
        "a publishable key can say who the customer is.",
    ),
}


def _signing_cards(request: MemberRequest, revealed: dict[str, str]) -> list[dict[str, Any]]:
    cards = []
    for key, (purpose, title, about) in SIGNING.items():
        expiry = secrets.signing_secret_previous_expiry(project=request.project, purpose=purpose)
        cards.append({"key": key, "title": title, "about": about, "secret": revealed.get(key), "expiry": expiry})
    return cards


@never_cache
@member_page("GET")
def signing_secret(request: MemberRequest) -> HttpResponse:
    return render(request, "dashboard/signing_secret.html", {"cards": _signing_cards(request, {})})


@never_cache
@member_page("POST")
def signing_secret_reveal(request: MemberRequest, which: str) -> HttpResponse:
    """Shows a signing secret: owners and admins only (it is what the project's secret key reads)."""
    manager_required(request)
    value, _ = secrets.signing_secret_current(project=request.project, purpose=SIGNING[which][0])
    return render(request, "dashboard/signing_secret.html", {"cards": _signing_cards(request, {which: value})})


@never_cache
@member_page("POST")
def signing_secret_rotate(request: MemberRequest, which: str) -> HttpResponse:
    manager_required(request)
    value = secrets.signing_secret_rotate(project=request.project, purpose=SIGNING[which][0])
    messages.success(
        request, "Rotated. The previous secret keeps working for 24 hours: deploy the new one before then."
    )
    return render(request, "dashboard/signing_secret.html", {"cards": _signing_cards(request, {which: value})})


MEMBER_FIELDS = ("$.email", "$.role")


def _invitation_sent(email: str) -> str:
    # The same words whether the address has an account or not: the members page tells nobody who has one.
    return f"We sent an invitation to {email}. Its link works once, for {invitations.INVITATION_DAYS} days."


@never_cache
@member_page("GET", "POST")
def members(request: MemberRequest) -> HttpResponse:
    """The organization's members and pending invitations; owners and admins invite people by email with a role
    (kagent/invitations.py: the invitee sets their own password at the mailed link, or accepts signed in)."""
    organization = request.membership.organization
    problems = Problems()
    typed = {"email": "", "role": Membership.Role.MEMBER.value}
    if request.method == "POST":
        manager_required(request)
        typed = {"email": request.POST.get("$.email", "").strip(), "role": request.POST.get("$.role", "")}
        try:
            invitation = invitations.invitation_send(
                organization=organization,
                email=typed["email"],
                role=typed["role"],
                invited_by=request.membership,
                base_url=public_base_url(request),
            )
        except ApiError as exc:
            problems = problems_from(exc, MEMBER_FIELDS)
        else:
            messages.success(request, _invitation_sent(invitation.email))
            return redirect("dashboard:members")
    context = {
        "organization": organization,
        "members": selectors.member_list(organization=organization),
        "invitations": invitations.invitation_list(organization=organization),
        "invitation_days": invitations.INVITATION_DAYS,
        "roles": Membership.Role.choices,
        "problems": problems,
        "typed": typed,
    }
    return render(request, "dashboard/members.html", context, status=422 if problems else 200)


@member_page("POST")
def invitation_resend(request: MemberRequest, invitation_id: str) -> HttpResponse:
    manager_required(request)
    try:
        invitation = invitations.invitation_resend(
            organization=request.membership.organization,
            invitation_id=invitation_id,
            sent_by=request.membership,
            base_url=public_base_url(request),
        )
    except ApiError as exc:
        if exc.status == 404:
            raise
        messages.error(request, exc.message)
    else:
        messages.success(request, _invitation_sent(invitation.email))
    return redirect("dashboard:members")


@member_page("POST")
def invitation_revoke(request: MemberRequest, invitation_id: str) -> HttpResponse:
    manager_required(request)
    try:
        invitation = invitations.invitation_revoke(
            organization=request.membership.organization, invitation_id=invitation_id, revoked_by=request.membership
        )
    except ApiError as exc:
        if exc.status == 404:
            raise
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Revoked the invitation to {invitation.email}: its link no longer works.")
    return redirect("dashboard:members")


@member_page("POST")
def member_remove(request: MemberRequest, membership_id: int) -> HttpResponse:
    manager_required(request)
    try:
        services.member_remove(
            organization=request.membership.organization, membership_id=membership_id, removed_by=request.membership
        )
    except ApiError as exc:
        if exc.status == 404:
            raise
        messages.error(request, exc.message)
    else:
        messages.success(request, "Removed.")
    return redirect("dashboard:members")


EGRESS_PAGE = 50


@member_page("GET")
def egress(request: MemberRequest) -> HttpResponse:
    """Every outbound call and refusal of the project, as `GET /v1/egress_events` lists them."""
    problems = Problems()
    events: list[dict[str, Any]] = []
    next_query = None
    try:
        filters = egress_filters(request.GET)
    except ApiError as exc:
        problems.add("$.decision" if exc.message.startswith("decision") else "$", exc.message)
    else:
        queryset = selectors.egress_event_list(project=request.project, **filters).order_by("-pk")
        cursor = request.GET.get("cursor", "")
        if cursor.isascii() and cursor.isdigit() and len(cursor) <= 18:
            queryset = queryset.filter(pk__lt=int(cursor))
        rows: list[EgressEvent] = list(queryset[: EGRESS_PAGE + 1])
        events = [EGRESS_EVENT.render(event) for event in rows[:EGRESS_PAGE]]
        if len(rows) > EGRESS_PAGE:
            next_query = next_page_query(request, str(rows[EGRESS_PAGE - 1].pk))
    context = {"events": events, "query": request.GET, "problems": problems, "next_query": next_query}
    return render(request, "dashboard/egress.html", context, status=422 if problems else 200)


class PasswordChangeView(auth_views.PasswordChangeView):
    template_name = "dashboard/password.html"
    success_url = reverse_lazy("dashboard:agents")

    def form_valid(self, form: Any) -> HttpResponse:
        messages.success(self.request, "Your password is changed.")
        return super().form_valid(form)
