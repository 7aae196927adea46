from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.forms import AuthenticationForm, PasswordResetForm
from django.http import HttpRequest

from kagent import broker, throttle
from kagent.clients import client_address
from kagent.models import ApiKey
from kagent.services import limit_ceilings


class EmailLoginForm(AuthenticationForm):
    username = forms.EmailField(
        label="Email", widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "email"})
    )

    def clean_username(self) -> str:
        # Emails are stored lowercased (UserManager.create_user); "Alice@Example.com" is the same user.
        return str(self.cleaned_data["username"]).strip().lower()

    def clean(self) -> dict[str, Any]:
        """Sign-in throttled per account and address and per address (KAGENT_SIGNIN_FAILURES failures in 15 minutes;
        the account from every address: KAGENT_SIGNIN_ACCOUNT_FAILURES), with the
        same answer whether the account exists or not; the password isn't even checked while throttled."""
        email = str(self.cleaned_data.get("username") or "")
        address = client_address(self.request) if self.request is not None else ""
        wait = throttle.signin_wait(email, address)
        if wait is not None:
            minutes = max(1, round(wait / 60))
            raise forms.ValidationError(
                f"Too many failed sign-ins. Try again in {minutes} minute{'s' if minutes != 1 else ''}.",
                code="throttled",
            )
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            throttle.signin_failed(email, address)
            raise
        throttle.signin_succeeded(email, address)
        return cleaned


class ForgotPasswordForm(PasswordResetForm):
    """ "Forgot your password?": the same answer whether the address has an account or not, and the same work in the
    request — the links are looked up and mailed by a task (`dashboard.password_reset_mail`), so the request's time
    tells nothing either. Throttled per client address (refused, saying when to try again) and per email address
    (over the limit no mail is sent, and the answer doesn't change): kagent/throttle.py."""

    email = forms.EmailField(
        label="Email", max_length=254, widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "email"})
    )

    def __init__(self, *args: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
        self.request = request
        super().__init__(*args, **kwargs)

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        address = client_address(self.request) if self.request is not None else ""
        wait = throttle.password_reset_requested(address)
        if wait is not None:
            minutes = max(1, round(wait / 60))
            raise forms.ValidationError(
                f"Too many reset links asked from here. Try again in {minutes} minute{'s' if minutes != 1 else ''}.",
                code="throttled",
            )
        return cleaned

    def save(self, *args: Any, extra_email_context: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Queues the mail (the same for any address: a count in Redis and a message on the queue)."""
        email = self.cleaned_data["email"]
        if throttle.password_reset_mail_allowed(email):
            broker.enqueue(RESET_MAIL_TASK, email, (extra_email_context or {}).get("base_url", ""))


RESET_MAIL_TASK = "dashboard.password_reset_mail"
RESET_SUBJECT = "dashboard/email/password_reset_subject.txt"
RESET_BODY = "dashboard/email/password_reset.txt"


def password_reset_mail(email: str, base_url: str) -> int:
    """The task's work: a reset link mailed to each active account with the address (none: nothing is sent). How
    many were sent."""
    form = PasswordResetForm(data={"email": email})
    if not form.is_valid():
        return 0
    users = list(form.get_users(email))
    form.save(
        domain_override="K-Agent",
        subject_template_name=RESET_SUBJECT,
        email_template_name=RESET_BODY,
        extra_email_context={"base_url": base_url},
    )
    return len(users)


class ApiKeyCreateForm(forms.Form):
    kind = forms.ChoiceField(choices=ApiKey.Kind.choices, initial=ApiKey.Kind.SECRET)
    name = forms.CharField(max_length=200, required=False)


class RequestLimitsForm(forms.Form):
    """The project's own limits a minute; empty: the default (shown as the placeholder)."""

    api_rate_secret = forms.IntegerField(
        label="Requests a minute per secret key", required=False, min_value=1, max_value=1_000_000
    )
    api_rate_publishable = forms.IntegerField(
        label="Requests a minute per visitor (publishable key)", required=False, min_value=1, max_value=1_000_000
    )
    run_rate_publishable = forms.IntegerField(
        label="Runs started a minute per visitor (publishable key)", required=False, min_value=1, max_value=1_000_000
    )

    def clean(self) -> dict[str, Any]:
        """The operator's ceilings (KAGENT_MAX_*), said next to the field."""
        cleaned = super().clean() or {}
        for name, ceiling in limit_ceilings().items():
            value = cleaned.get(name)
            if value is not None and value > ceiling:
                self.add_error(name, f"At most {ceiling} a minute on this service.")
        return cleaned
