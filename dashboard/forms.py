from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm

from kagent.models import ApiKey


class EmailLoginForm(AuthenticationForm):
    username = forms.EmailField(
        label="Email", widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "email"})
    )

    def clean_username(self) -> str:
        # Emails are stored lowercased (UserManager.create_user); "Alice@Example.com" is the same user.
        return str(self.cleaned_data["username"]).strip().lower()


class ApiKeyCreateForm(forms.Form):
    kind = forms.ChoiceField(choices=ApiKey.Kind.choices, initial=ApiKey.Kind.SECRET)
    name = forms.CharField(max_length=200, required=False)
