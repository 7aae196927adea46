"""API keys (create, revoke, a publishable key's allowed origins) and the project's request limits: the first of
the settings pages. Owners and admins change them; members look."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from agents.selectors import agent_list
from dashboard.access import MemberRequest, manager_required, member_page
from dashboard.forms import ApiKeyCreateForm, RequestLimitsForm
from kagent import services
from kagent.errors import ApiError, NotFound
from kagent.selectors import api_key_list


@member_page("GET")
def settings_home(request: HttpRequest) -> HttpResponse:
    return redirect("dashboard:api-keys")


# never_cache: the page that reveals a new key must not be kept by the browser or a proxy.
@never_cache
@member_page("GET", "POST")
def api_keys(request: MemberRequest) -> HttpResponse:
    created_key = None
    form = ApiKeyCreateForm(request.POST if request.method == "POST" else None)
    if request.method == "POST":
        manager_required(request)
        if form.is_valid():
            _, created_key = services.api_key_create(
                project=request.project,
                kind=form.cleaned_data["kind"],
                name=form.cleaned_data["name"],
            )
            form = ApiKeyCreateForm()
    return _api_keys_page(request, form, created_key, None)


def _api_keys_page(
    request: MemberRequest,
    form: ApiKeyCreateForm,
    created_key: str | None,
    limits: RequestLimitsForm | None,
    origins: OriginsProblem | None = None,
) -> HttpResponse:
    project = request.project
    keys = list(api_key_list(project=project))
    context = {
        "keys": keys,
        "browser_keys": [
            {
                "key": key,
                "text": origins.text if origins and origins.key_id == key.pk else "\n".join(key.allowed_origins),
                "error": origins.message if origins and origins.key_id == key.pk else None,
            }
            for key in keys
            if not key.is_secret and key.is_active
        ],
        "form": form,
        "created_key": created_key,
        # The widget's snippet names an agent: the first published one (the person changes it for another).
        "snippet_agent": agent_list(project=project)
        .filter(latest_version_number__isnull=False)
        .order_by("name")
        .first(),
        "limits": limits
        or RequestLimitsForm(
            initial={
                "api_rate_secret": project.api_rate_secret,
                "api_rate_publishable": project.api_rate_publishable,
                "run_rate_publishable": project.run_rate_publishable,
            }
        ),
        "limit_defaults": {
            "api_rate_secret": settings.KAGENT_API_RATE_SECRET,
            "api_rate_publishable": settings.KAGENT_API_RATE_PUBLISHABLE,
            "run_rate_publishable": settings.KAGENT_RUN_RATE_PUBLISHABLE,
        },
        "publishable_ceiling_factor": settings.KAGENT_PUBLISHABLE_CEILING_FACTOR,
    }
    return render(request, "dashboard/api_keys.html", context)


@member_page("POST")
def request_limits(request: MemberRequest) -> HttpResponse:
    manager_required(request)
    form = RequestLimitsForm(request.POST)
    if form.is_valid():
        services.project_limits_update(project=request.project, **form.cleaned_data)
        return redirect("dashboard:api-keys")
    return _api_keys_page(request, ApiKeyCreateForm(), None, form)


@dataclass(frozen=True)
class OriginsProblem:
    """A key's allowed origins as typed, refused with the API's message (shown next to that key's field)."""

    key_id: str
    text: str
    message: str


@member_page("POST")
def api_key_origins(request: MemberRequest, key_id: str) -> HttpResponse:
    """A publishable key's allowed origins (CORS for the chat widget): one origin a line (or comma-separated)."""
    manager_required(request)
    text = request.POST.get("allowed_origins", "")
    origins = [item for item in text.replace(",", " ").split() if item]
    try:
        key = services.api_key_origins_update(project=request.project, key_id=key_id, allowed_origins=origins)
    except NotFound:
        raise Http404("No such API key.") from None
    except ApiError as exc:
        if exc.code == "origins_for_publishable_keys_only":  # no field on the page to show it by
            messages.error(request, exc.message)
            return redirect("dashboard:api-keys")
        problem = OriginsProblem(key_id, text, exc.message)
        return _api_keys_page(request, ApiKeyCreateForm(), None, None, problem)
    shown = ", ".join(key.allowed_origins) or "none: no web page may use it"
    messages.success(request, f"Saved the allowed origins of {key.hint}: {shown}.")
    return redirect("dashboard:api-keys")


@member_page("POST")
def api_key_revoke(request: MemberRequest, key_id: str) -> HttpResponse:
    manager_required(request)
    try:
        key = services.api_key_revoke(project=request.project, key_id=key_id)
    except NotFound:
        raise Http404("No such API key.") from None
    if request.htmx:
        return render(request, "dashboard/_api_key_row.html", {"key": key})
    return redirect("dashboard:api-keys")
