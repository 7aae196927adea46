"""The dashboard's account pages outside a project: home, sign in and out, the project picker (a project's pages:
dashboard/pages/, each behind `member_page`)."""

from __future__ import annotations

from django.contrib.auth import logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from dashboard.access import SESSION_KEY, signed_in_user
from dashboard.forms import EmailLoginForm
from kagent.selectors import membership_for_project, project_list_for_user


def home(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("dashboard:agents")
    return redirect("dashboard:login")


class LoginView(auth_views.LoginView):
    template_name = "dashboard/login.html"
    form_class = EmailLoginForm
    redirect_authenticated_user = True


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    logout(request)
    return redirect("dashboard:login")


@login_required
@require_GET
def project_picker(request: HttpRequest) -> HttpResponse:
    projects = project_list_for_user(user=signed_in_user(request))
    return render(request, "dashboard/projects.html", {"projects": projects})


@login_required
@require_POST
def project_select(request: HttpRequest, project_id: str) -> HttpResponse:
    if membership_for_project(user=signed_in_user(request), project_id=project_id) is None:
        raise Http404("No such project.")
    request.session[SESSION_KEY] = project_id
    return redirect("dashboard:agents")
