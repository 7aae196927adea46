"""Which project a dashboard request works on: the one picked, if the user is a member of its organization."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponseBase
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from django_htmx.middleware import HtmxDetails

from dashboard.problems import refuse_unstorable
from kagent.errors import ApiError, NotFound
from kagent.models import Membership, Project, User
from kagent.selectors import membership_for_project, project_list_for_user

SESSION_KEY = "kagent_project_id"


class MemberRequest(HttpRequest):
    """What a view behind `project_required` receives: a signed-in member working on one of their projects."""

    user: User  # narrowed from User | AnonymousUser by login_required
    project: Project
    membership: Membership
    htmx: HtmxDetails  # django-htmx's middleware


def signed_in_user(request: HttpRequest) -> User:
    """The member behind a request that passed login_required."""
    assert isinstance(request.user, User)
    return request.user


View = Callable[..., HttpResponseBase]


def project_required(view: View) -> View:
    """Sets request.project and request.membership, or sends the user to the project picker."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        user = signed_in_user(request)
        project_id = request.session.get(SESSION_KEY)
        membership = membership_for_project(user=user, project_id=project_id) if project_id else None
        if membership is None:
            projects = list(project_list_for_user(user=user)[:2])
            if len(projects) == 1:
                # One project: no need to ask.
                request.session[SESSION_KEY] = projects[0].id
                membership = membership_for_project(user=user, project_id=projects[0].id)
            else:
                return redirect("dashboard:projects")
        assert membership is not None
        member = cast(MemberRequest, request)
        member.membership = membership
        member.project = membership.organization.projects.get(pk=request.session[SESSION_KEY])
        return view(member, *args, **kwargs)

    return wrapper


def manager_required(request: HttpRequest) -> None:
    """Owners and admins change settings; members look."""
    if not cast(MemberRequest, request).membership.can_manage:
        raise PermissionDenied("Only owners and admins can do this.")


def member_page(*methods: str, checks_unstorable: bool = False) -> Callable[[View], View]:
    """A page (or htmx endpoint) of the picked project: signed in, a member, one of `methods`; an object the
    project's selectors don't find (another project's, or none) is a 404 like any unknown page. A form post holding
    what the database can't store (a NUL character, which the API's JSON parser refuses before any view) is a 422
    that names it, unless the view `checks_unstorable` itself (to show it next to its field)."""

    def decorate(view: View) -> View:
        @project_required
        @require_http_methods(list(methods))
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if request.method == "POST" and not checks_unstorable:
                try:
                    refuse_unstorable(request.POST)
                except ApiError as exc:
                    return render(request, "dashboard/refused.html", {"message": exc.message}, status=422)
            try:
                return view(request, *args, **kwargs)
            except NotFound:
                raise Http404("No such object in this project.") from None

        return wrapper

    return decorate
