"""Pages reached from a mail, signed in or not: an invitation's link (kagent/invitations.py) and "Forgot your
password?" (Django's password reset views). Both links' tokens leave the address bar at once: the page moves the
token into the session and continues at a URL without it, so it isn't kept in the history, sent as a Referer or
written to an access log past that one request (as Django's PasswordResetConfirmView does)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import SetPasswordForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from dashboard.access import SESSION_KEY
from dashboard.forms import ForgotPasswordForm
from dashboard.links import public_base_url
from kagent import invitations
from kagent.errors import ApiError
from kagent.models import Invitation, Project, User

INVITATION_KEY = "kagent_invitation"  # the session's copy of the link's token


def _invalid(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/invitation.html", {"invitation": None}, status=404)


@never_cache
@require_GET
def invitation_link(request: HttpRequest, token: str) -> HttpResponse:
    """The link in the mail."""
    if invitations.invitation_by_token(token=token) is None:
        return _invalid(request)
    request.session[INVITATION_KEY] = token
    return redirect("dashboard:invitation")


def _signed_in(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


@never_cache
@require_http_methods(["GET", "POST"])
def invitation(request: HttpRequest) -> HttpResponse:
    """An invitation, as its invitee sees it: someone new sets their password and joins; an existing account signs
    in (as the invited address) and accepts; someone signed in as another account signs out first."""
    token = str(request.session.get(INVITATION_KEY, ""))
    found = invitations.invitation_by_token(token=token)
    if found is None:
        request.session.pop(INVITATION_KEY, None)
        return _invalid(request)
    user = _signed_in(request)
    form = None
    problem: ApiError | None = None
    if request.method == "POST":
        action = request.POST.get("action", "")
        if action == "sign-out":
            logout(request)
            request.session[INVITATION_KEY] = token  # a new session: the invitation goes on in it
            return redirect("dashboard:invitation")
        try:
            if action == "accept" and user is not None:
                membership = invitations.invitation_accept(token=token, user=user)
                return _joined(request, found, membership.organization.projects.order_by("created_at").first())
            if action == "join" and user is None:
                form = SetPasswordForm(User(email=found.email), request.POST)
                if form.is_valid():
                    user = invitations.invitation_accept_new_account(
                        token=token, password=form.cleaned_data["new_password1"]
                    )
                    login(request, user)
                    return _joined(request, found, found.organization.projects.order_by("created_at").first())
        except ApiError as exc:
            problem = exc
    has_account = invitations.invitation_has_account(invitation=found)
    if form is None and user is None and not has_account:
        form = SetPasswordForm(User(email=found.email))
    context = {
        "invitation": found,
        "has_account": has_account,
        "signed_in_as": user.email if user is not None else None,
        "form": form,
        "problem": problem.message if problem else None,
        "sign_in_url": f"{reverse('dashboard:login')}?next={reverse('dashboard:invitation')}",
    }
    status = problem.status if problem else 422 if form is not None and form.errors else 200
    return render(request, "dashboard/invitation.html", context, status=status)


def _joined(request: HttpRequest, invitation: Invitation, project: Project | None) -> HttpResponse:
    request.session.pop(INVITATION_KEY, None)
    if project is not None:
        request.session[SESSION_KEY] = project.pk  # work in the organization just joined
    messages.success(request, f"You joined {invitation.organization.name} as {invitation.role}.")
    return redirect("dashboard:agents")


# --- forgot password ------------------------------------------------------------------------------------------------


class ForgotPasswordView(auth_views.PasswordResetView):
    """Mails a reset link to an account with the address given, if there is one; the same answer either way."""

    template_name = "dashboard/password_reset.html"
    form_class = ForgotPasswordForm
    email_template_name = "dashboard/email/password_reset.txt"
    subject_template_name = "dashboard/email/password_reset_subject.txt"
    success_url = reverse_lazy("dashboard:password-reset-sent")

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "request": self.request}

    def form_valid(self, form: Any) -> HttpResponse:
        try:
            self.extra_email_context = {"base_url": public_base_url(self.request)}
        except ApiError as exc:
            form.add_error(None, exc.message)
            return self.form_invalid(form)
        return super().form_valid(form)


class ForgotPasswordSentView(auth_views.PasswordResetDoneView):
    template_name = "dashboard/password_reset_sent.html"


class ResetPasswordView(auth_views.PasswordResetConfirmView):
    """The reset link's page: a new password, then signed in. A link that is no longer valid (used: it is bound to
    the password it replaces; older than PASSWORD_RESET_TIMEOUT; not one of ours) is a 404 that says so."""

    template_name = "dashboard/password_reset_confirm.html"
    post_reset_login = True
    success_url = reverse_lazy("dashboard:agents")

    def render_to_response(self, context: dict[str, Any], **kwargs: Any) -> HttpResponse:
        if not self.validlink:
            kwargs["status"] = 404
        return super().render_to_response(context, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        messages.success(self.request, "Your password is set.")
        return super().form_valid(form)
