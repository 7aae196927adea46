"""The values a template's placeholders stand for, each checked for where it lands: the model's arguments (`token`
and `text` formats, Arabic-Indic digits read as ASCII), the verified end user, the agent's variables and secrets (only
to their allowed hosts); and `TemplateError`, the refusal of any of them. tools/templating.py renders a whole request
with them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tools.placeholders import Placeholder
from tools.shaping import ascii_digits, clean_text

TOKEN_MAX = 64
TEXT_MAX = 1000
_TOKEN_PUNCT = frozenset(" ._@:+-")
_ASCII_DIGITS = frozenset("0123456789")


class TemplateError(ValueError):
    """Rendering refused; nothing was sent. Stable codes:

    invalid_template, unknown_placeholder, invalid_arguments, unresolved_placeholder, blank_placeholder,
    verified_user_required, secret_host_not_allowed, unsafe_path, forbidden_header, invalid_header_value.
    `placeholder` is the offending `{{…}}` when there is one; `parameter` the argument name when it is one.
    """

    def __init__(self, code: str, message: str, *, placeholder: str = "", parameter: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.placeholder = placeholder
        self.parameter = parameter


@dataclass(frozen=True)
class EndUserIdentity:
    """A verified end user, from the credential (secret-key call or end_user_token), never from the model."""

    external_id: str
    traits: Mapping[str, Any] = field(default_factory=dict)


class SecretLike(Protocol):
    """What a secret lookup returns (kagent.secrets.SecretValue is one)."""

    @property
    def value(self) -> str: ...

    @property
    def allowed_hosts(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class SecretValue:
    value: str
    allowed_hosts: tuple[str, ...]


SecretLookup = Callable[[str], SecretLike | None]


# --- argument checks ---------------------------------------------------------------------------------------------


def normalize_arguments(value: Any) -> Any:
    """Arabic-Indic digits in every string of the model's arguments as ASCII (do this before schema validation)."""
    if isinstance(value, str):
        return ascii_digits(value)
    if isinstance(value, list):
        return [normalize_arguments(v) for v in value]
    if isinstance(value, dict):
        return {k: normalize_arguments(v) for k, v in value.items()}
    return value


def is_token(text: str) -> bool:
    return 0 < len(text) <= TOKEN_MAX and all(ch.isalpha() or ch in _ASCII_DIGITS or ch in _TOKEN_PUNCT for ch in text)


def _scalar_text(value: Any, *, what: str, placeholder: str, parameter: str = "") -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise TemplateError(
                "invalid_arguments", f"{what} is not a finite number", placeholder=placeholder, parameter=parameter
            )
        return json.dumps(value)
    if isinstance(value, str):
        return value
    raise TemplateError(
        "invalid_arguments",
        f"{what} must be a single value here, not a list or object",
        placeholder=placeholder,
        parameter=parameter,
    )


# --- placeholder resolution --------------------------------------------------------------------------------------


class Resolver:
    def __init__(
        self,
        *,
        properties: Mapping[str, Any],
        arguments: Mapping[str, Any],
        end_user: EndUserIdentity | None,
        variables: Mapping[str, str],
        secret_lookup: SecretLookup,
        host: str,
    ) -> None:
        self.properties = properties
        self.arguments = arguments
        self.end_user = end_user
        self.variables = variables
        self.secret_lookup = secret_lookup
        self.host = host
        self.secret_values: list[str] = []

    def _blank(self, ph: Placeholder) -> TemplateError:
        return TemplateError(
            "blank_placeholder",
            f"{ph.raw} is blank",
            placeholder=ph.raw,
            parameter=ph.name if ph.root == "args" else "",
        )

    def _format(self, ph: Placeholder) -> str:
        prop = self.properties.get(ph.name)
        if not isinstance(prop, dict):
            raise TemplateError("invalid_template", f"{ph.raw} is not a declared parameter", placeholder=ph.raw)
        fmt = prop.get("x-kagent-format", "token")
        if fmt not in ("token", "text"):
            raise TemplateError("invalid_template", f"{ph.raw} has an unknown x-kagent-format", placeholder=ph.raw)
        return str(fmt)

    def _argument_text(self, ph: Placeholder, text: str, fmt: str) -> str:
        text = ascii_digits(text)
        if fmt == "token":
            if not text.strip():
                raise self._blank(ph)
            if not is_token(text):
                raise TemplateError(
                    "invalid_arguments",
                    f"{ph.name} must be at most {TOKEN_MAX} letters, digits, spaces or . _ @ : + -",
                    placeholder=ph.raw,
                    parameter=ph.name,
                )
            return text
        text = clean_text(text, keep_joiners=False)
        if not text.strip():
            raise self._blank(ph)
        if len(text) > TEXT_MAX:
            raise TemplateError(
                "invalid_arguments",
                f"{ph.name} is longer than {TEXT_MAX} characters",
                placeholder=ph.raw,
                parameter=ph.name,
            )
        return text

    def _argument_json(self, ph: Placeholder, value: Any, fmt: str) -> Any:
        """An argument's JSON value for a body string that is exactly this placeholder."""
        if isinstance(value, str):
            return self._argument_text(ph, value, fmt)
        if isinstance(value, list):
            return [self._argument_json(ph, v, fmt) for v in value]
        if isinstance(value, dict):
            return {k: self._argument_json(ph, v, fmt) for k, v in value.items()}
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            raise TemplateError(
                "invalid_arguments", f"{ph.name} is not a finite number", placeholder=ph.raw, parameter=ph.name
            )
        return value

    def value(self, ph: Placeholder, where: str) -> Any:
        """The value of `ph` for location `where` (path, query, header, body_text, body_json)."""
        if ph.root == "args":
            return self._argument_value(ph, where)
        if ph.root == "end_user":
            raw = self._end_user_raw(ph)
        elif ph.root == "var":
            if ph.name not in self.variables:
                raise TemplateError("unresolved_placeholder", f"the variable {ph.name} is not set", placeholder=ph.raw)
            raw = self.variables[ph.name]
        elif ph.root == "secret":
            raw = self._secret_raw(ph)
        else:  # pragma: no cover - placeholders.parse admits no other root
            raise TemplateError("invalid_template", f"{ph.raw} is not a known placeholder", placeholder=ph.raw)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            raise self._blank(ph)
        if where == "body_json":
            return raw
        text = _scalar_text(raw, what=ph.raw, placeholder=ph.raw)
        if not text.strip():
            raise self._blank(ph)
        return text

    def _argument_value(self, ph: Placeholder, where: str) -> Any:
        fmt = self._format(ph)
        if ph.name not in self.arguments:
            raise TemplateError(
                "unresolved_placeholder",
                f"the argument {ph.name} is missing",
                placeholder=ph.raw,
                parameter=ph.name,
            )
        raw = self.arguments[ph.name]
        if raw is None:
            raise self._blank(ph)
        if where in ("path", "query", "header") and fmt != "token":
            raise TemplateError(
                "invalid_template", f"{ph.raw}: text parameters may only be used in the body", placeholder=ph.raw
            )
        if where == "body_json":
            return self._argument_json(ph, raw, fmt)
        text = _scalar_text(raw, what=ph.name, placeholder=ph.raw, parameter=ph.name)
        text = self._argument_text(ph, text, fmt if where == "body_text" else "token")
        if where == "header" and not text.isascii():
            raise TemplateError(
                "invalid_arguments",
                f"{ph.name} may only hold ASCII characters here",
                placeholder=ph.raw,
                parameter=ph.name,
            )
        return text

    def _end_user_raw(self, ph: Placeholder) -> Any:
        if self.end_user is None:
            raise TemplateError("verified_user_required", f"{ph.raw} needs a verified end user", placeholder=ph.raw)
        if not ph.is_trait:
            return self.end_user.external_id
        if isinstance(self.end_user.traits, Mapping) and ph.name in self.end_user.traits:
            return self.end_user.traits[ph.name]
        raise TemplateError("unresolved_placeholder", f"the end user has no trait {ph.name}", placeholder=ph.raw)

    def _secret_raw(self, ph: Placeholder) -> Any:
        secret = self.secret_lookup(ph.name)
        if secret is None:
            raise TemplateError("unresolved_placeholder", f"the secret {ph.name} does not exist", placeholder=ph.raw)
        allowed = {h.strip().lower().rstrip(".") for h in secret.allowed_hosts}
        if self.host not in allowed:
            raise TemplateError(
                "secret_host_not_allowed",
                f"the secret {ph.name} may not be sent to {self.host}",
                placeholder=ph.raw,
            )
        raw = secret.value
        if isinstance(raw, str) and raw.strip():
            self.secret_values.append(raw)
        return raw
