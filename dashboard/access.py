"""Which project a dashboard request works on: the one picked, if the user is a member of its organization."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from kagent.selectors import membership_for_project, project_list_for_user

SESSION_KEY = "kagent_project_id"

View = Callable[..., HttpResponse]


def project_required(view: View) -> View:
    """Sets request.project and request.membership, or sends the user to the project picker."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        project_id = request.session.get(SESSION_KEY)
        membership = membership_for_project(user=request.user, project_id=project_id) if project_id else None
        if membership is None:
            projects = list(project_list_for_user(user=request.user)[:2])
            if len(projects) == 1:
                # One project: no need to ask.
                request.session[SESSION_KEY] = projects[0].id
                membership = membership_for_project(user=request.user, project_id=projects[0].id)
            else:
                return redirect("dashboard:projects")
        assert membership is not None
        request.membership = membership  # type: ignore[attr-defined]
        request.project = membership.organization.projects.get(pk=request.session[SESSION_KEY])  # type: ignore[attr-defined]
        return view(request, *args, **kwargs)

    return wrapper


def manager_required(request: HttpRequest) -> None:
    """Owners and admins change settings; members look."""
    if not request.membership.can_manage:  # type: ignore[attr-defined]
        raise PermissionDenied("Only owners and admins can do this.")
