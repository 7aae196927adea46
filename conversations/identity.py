"""Who the end user is: only from the credential (SPEC §3). Never from the model.

Verified when the call is made with a secret key and names `end_user: {"external_id", "traits"}`, or when it
carries `end_user_token`: a JWT (HS256) signed with the project's end-user secret, `sub` = external id, optional
`traits`, required `exp`, at most 24 hours away (`MAX_TOKEN_LIFETIME_S`: a token leaked from a browser must not be a
customer's identity for years; the business's server signs a fresh one when needed). Otherwise anonymous, counted
per session.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import jwt
from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations.models import EndUser
from kagent.errors import ApiError, Unprocessable
from kagent.models import ApiKey, Project, SigningSecret
from kagent.secrets import signing_secrets_valid

MAX_TRAITS = 50
MAX_TRAIT_VALUE = 1000
MAX_TOKEN_LIFETIME_S = 24 * 3600  # how far away an end_user_token's exp may be
TOKEN_LEEWAY_S = 30  # clock skew allowed between the business's server and ours


@dataclass(frozen=True)
class EndUserClaim:
    """`end_user` as a secret-key caller names it: `traits` None when not given (the stored traits stay)."""

    external_id: str
    traits: dict[str, Any] | None = None


@dataclass(frozen=True)
class Identity:
    end_user: EndUser | None

    @property
    def verified(self) -> bool:
        return self.end_user is not None


ANONYMOUS = Identity(None)


def _check_external_id(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 255:
        raise Unprocessable(
            "invalid_end_user",
            "external_id is a non-empty string of at most 255 characters.",
            details=[{"path": path, "message": "invalid external_id"}],
        )
    if any(ord(ch) < 0x20 or 0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise Unprocessable("invalid_end_user", "external_id may not hold control characters or lone surrogates.")
    return value


def _check_traits(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_TRAITS:
        raise Unprocessable(
            "invalid_end_user",
            f"traits is an object with at most {MAX_TRAITS} keys.",
            details=[{"path": path, "message": "invalid traits"}],
        )
    for key, item in value.items():
        if not isinstance(key, str) or not key or len(key) > 64:
            raise Unprocessable("invalid_end_user", "trait names are strings of at most 64 characters.")
        if isinstance(item, str) and len(item) > MAX_TRAIT_VALUE:
            raise Unprocessable("invalid_end_user", f"trait values are at most {MAX_TRAIT_VALUE} characters.")
        if isinstance(item, str) and any(ch == "\x00" or 0xD800 <= ord(ch) <= 0xDFFF for ch in key + item):
            raise Unprocessable("invalid_end_user", "traits may not hold NUL characters or lone surrogates.")
        if isinstance(item, float) and item != item or item in (float("inf"), float("-inf")):
            raise Unprocessable("invalid_end_user", "trait numbers must be finite.")
        if not isinstance(item, (str, int, float, bool)) and item is not None:
            raise Unprocessable("invalid_end_user", "trait values are strings, numbers, booleans or null.")
    return value


def _upsert(project: Project, external_id: str, traits: dict[str, Any] | None) -> EndUser:
    user = EndUser.objects.filter(project=project, external_id=external_id).first()
    if user is None:
        try:
            with transaction.atomic():
                return EndUser.objects.create(project=project, external_id=external_id, traits=traits or {})
        except IntegrityError:
            user = EndUser.objects.get(project=project, external_id=external_id)
    if traits is not None and traits != user.traits:
        EndUser.objects.filter(pk=user.pk).update(traits=traits, updated_at=timezone.now())
        user.traits = traits
    return user


def _verify_token(project: Project, token: Any) -> tuple[str, dict[str, Any] | None]:
    if not isinstance(token, str) or not token or len(token) > 8192:
        raise Unprocessable("invalid_end_user_token", "end_user_token is a JWT string.")
    last_error = "the token is not signed with this project's end-user secret"
    for secret in signing_secrets_valid(project=project, purpose=SigningSecret.Purpose.END_USER):
        try:
            claims = jwt.decode(
                token, key=secret, algorithms=["HS256"], options={"require": ["exp", "sub"]}, leeway=TOKEN_LEEWAY_S
            )
        except jwt.ExpiredSignatureError:
            raise Unprocessable("invalid_end_user_token", "The end_user_token has expired (exp).") from None
        except jwt.MissingRequiredClaimError as exc:
            raise Unprocessable("invalid_end_user_token", f"The end_user_token lacks the {exc.claim} claim.") from None
        except jwt.InvalidSignatureError:
            continue
        except jwt.InvalidTokenError as exc:
            last_error = str(exc)[:200]
            continue
        if int(claims["exp"]) > time.time() + MAX_TOKEN_LIFETIME_S + TOKEN_LEEWAY_S:  # PyJWT read it with int()
            raise Unprocessable(
                "invalid_end_user_token",
                "The end_user_token's exp is more than 24 hours away: sign short-lived tokens (at most 24 hours).",
            )
        external_id = _check_external_id(claims.get("sub"), "$.end_user_token.sub")
        traits = _check_traits(claims.get("traits"), "$.end_user_token.traits") if "traits" in claims else None
        return external_id, traits
    raise Unprocessable("invalid_end_user_token", f"The end_user_token is not valid: {last_error}.")


def token_external_id(project: Project, token: str) -> str | None:
    """The end user a valid `end_user_token` names, or None (expired, forged, for another project…)."""
    try:
        external_id, _ = _verify_token(project, token)
    except Unprocessable:
        return None
    return external_id


def identity_resolve(
    *, project: Project, api_key: ApiKey | None, end_user: EndUserClaim | None, end_user_token: str | None
) -> Identity:
    """The run's end user. `api_key` None is the dashboard, trusted like the project's secret key."""
    if end_user is not None and end_user_token is not None:
        raise Unprocessable("invalid_request", "Give end_user or end_user_token, not both.")
    if end_user_token is not None:
        external_id, traits = _verify_token(project, end_user_token)
        return Identity(_upsert(project, external_id, traits))
    if end_user is not None:
        if api_key is not None and not api_key.is_secret:
            raise ApiError(
                "end_user_token_required",
                "With a publishable key, identify the end user with an end_user_token signed on your server; "
                "end_user is for secret keys.",
                status=403,
            )
        external_id = _check_external_id(end_user.external_id, "$.end_user.external_id")
        traits = _check_traits(end_user.traits, "$.end_user.traits") if end_user.traits is not None else None
        return Identity(_upsert(project, external_id, traits))
    return ANONYMOUS
