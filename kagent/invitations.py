"""Invitations to an organization, by email: writes and reads (SPEC §8, the members page; issue 27, item 1).

The contract:
- Owners and admins invite; only owners invite owners (as only owners remove owners).
- The invitee gets a link holding a random token, good once and for INVITATION_DAYS. Only the token's SHA-256 digest
  is stored; the token is in the mail and nowhere else, so nobody but the mail's recipient can open the link.
- Nothing is made when someone is invited: no account, no password, no membership. The one who invites is told the
  same whether the address has an account or not (no account discovery). At the link, someone new chooses their own
  password; an address that already has an account joins only when that account accepts, signed in.
- Sending again (or Resend) mails a fresh link and voids the old one; Revoke voids it; an invitation dies with the
  membership of the one who sent it (`member_remove`).
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from kagent import throttle
from kagent.errors import ApiError, NotFound
from kagent.models import Invitation, Membership, Organization, User

INVITATION_DAYS = 7
TOKEN_BYTES = 32


def _problem(code: str, message: str, path: str = "$", *, status: int = 422) -> ApiError:
    return ApiError(code, message, status=status, details=[{"path": path, "message": message}])


def _no_longer_valid() -> ApiError:
    return _problem(
        "invitation_not_valid",
        "This invitation link is no longer valid: it was used, revoked, replaced by a newer one, or it expired. "
        "Ask whoever invited you for a new one.",
        status=404,
    )


def _may_invite(*, organization: Organization, role: str, by: Membership, revoking: bool = False) -> None:
    what = "revoke invitations" if revoking else "invite members"
    if by.organization_id != organization.pk or not by.can_manage:
        raise _problem("permission_denied", f"Only owners and admins can {what}.", status=403)
    if role not in Membership.Role.values:
        raise _problem("invalid_role", "role is one of owner, admin, member.", "$.role")
    if role == Membership.Role.OWNER and by.role != Membership.Role.OWNER:
        message = "Only owners can revoke invitations of owners." if revoking else "Only owners can invite owners."
        raise _problem("permission_denied", message, "$.role", status=403)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _mail(*, invitation: Invitation, token: str, sender: User, base_url: str) -> None:
    """The invitation's mail: the same words whether the address has an account or not (the link's page tells)."""
    link = base_url.rstrip("/") + reverse("dashboard:invitation-link", kwargs={"token": token})
    organization = _one_line(invitation.organization.name)
    body = (
        f"{sender.email} invited you to join {organization} on K-Agent as {invitation.role}.\n\n"
        f"Open this link to accept:\n{link}\n\n"
        f"It works once, for {INVITATION_DAYS} days. There you choose your password, or sign in if you already have "
        "an account with this address.\n\n"
        "If you weren't expecting this, ignore this mail: nothing happens unless you open the link.\n"
    )
    send_mail(f"Join {organization} on K-Agent", body, None, [invitation.email])


def invitation_send(
    *, organization: Organization, email: str, role: str, invited_by: Membership, base_url: str
) -> Invitation:
    """Invites `email` to the organization as `role` and mails them the link (links start with `base_url`, the
    dashboard's public origin). An address with a pending invitation gets a fresh link: the old one stops working.
    The mail is sent before the invitation is committed: if it can't be, nothing changed (503 `mail_not_sent`)."""
    _may_invite(organization=organization, role=role, by=invited_by)
    email = email.strip().lower()
    try:
        validate_email(email)
    except ValidationError:
        raise _problem("invalid_email", "Enter an email address like name@example.com.", "$.email") from None
    if Membership.objects.filter(organization=organization, user__email=email).exists():
        raise _problem("already_member", f"{email} is already a member.", "$.email", status=409)
    throttle.invitation_sent(organization.pk)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    now = timezone.now()
    fields = {
        "role": role,
        "invited_by": invited_by.user,
        "token_digest": Invitation.digest_of(token),
        "created_at": now,
        "expires_at": now + timedelta(days=INVITATION_DAYS),
    }
    try:
        with transaction.atomic():
            invitation, _ = Invitation.objects.update_or_create(
                organization=organization, email=email, accepted_at__isnull=True, defaults=fields
            )
            _mail(invitation=invitation, token=token, sender=invited_by.user, base_url=base_url)
    except OSError:  # smtplib's errors, refused connections, timeouts
        raise _problem(
            "mail_not_sent", f"Not sent: the mail to {email} couldn't be sent. Try again later.", status=503
        ) from None
    return invitation


def invitation_resend(
    *, organization: Organization, invitation_id: str, sent_by: Membership, base_url: str
) -> Invitation:
    """Mails a fresh link for a pending invitation (also an expired one); the old link stops working."""
    invitation = invitation_list(organization=organization).filter(pk=invitation_id).first()
    if invitation is None:
        raise NotFound("No such invitation in this organization.")
    return invitation_send(
        organization=organization, email=invitation.email, role=invitation.role, invited_by=sent_by, base_url=base_url
    )


def invitation_revoke(*, organization: Organization, invitation_id: str, revoked_by: Membership) -> Invitation:
    """Voids a pending invitation: its link stops working."""
    invitation = invitation_list(organization=organization).filter(pk=invitation_id).first()
    if invitation is None:
        raise NotFound("No such invitation in this organization.")
    _may_invite(organization=organization, role=invitation.role, by=revoked_by, revoking=True)
    Invitation.objects.filter(pk=invitation.pk, accepted_at__isnull=True).delete()
    return invitation


def invitation_list(*, organization: Organization) -> QuerySet[Invitation]:
    """The organization's pending invitations (expired ones too, to send again), oldest first."""
    return (
        Invitation.objects.filter(organization=organization, accepted_at__isnull=True)
        .select_related("invited_by")
        .order_by("created_at", "pk")
    )


def invitation_by_token(*, token: str) -> Invitation | None:
    """The pending, unexpired invitation a link's token opens, or None."""
    if not token or len(token) > 200:
        return None
    return (
        Invitation.objects.filter(
            token_digest=Invitation.digest_of(token), accepted_at__isnull=True, expires_at__gt=timezone.now()
        )
        .select_related("organization", "invited_by")
        .first()
    )


def invitation_has_account(*, invitation: Invitation) -> bool:
    """Whether the invited address has an account: told only to whoever holds the link (the mail's recipient)."""
    return User.objects.filter(email=invitation.email).exists()


def _claim(token: str) -> Invitation:
    """The link's invitation, locked until the transaction ends, so it is accepted once."""
    invitation = (
        Invitation.objects.select_for_update()
        .filter(token_digest=Invitation.digest_of(token), accepted_at__isnull=True, expires_at__gt=timezone.now())
        .select_related("organization")
        .first()
    )
    if invitation is None:
        raise _no_longer_valid()
    return invitation


def invitation_accept(*, token: str, user: User) -> Membership:
    """An existing account accepts, signed in as the invited address: it joins with the invitation's role (a member
    already keeps their role). The link works no more."""
    with transaction.atomic():
        invitation = _claim(token)
        if user.email != invitation.email:
            raise _problem(
                "invitation_for_someone_else",
                f"This invitation is for {invitation.email}: sign in with that address to accept it.",
                status=403,
            )
        membership, _ = Membership.objects.get_or_create(
            organization=invitation.organization, user=user, defaults={"role": invitation.role}
        )
        Invitation.objects.filter(pk=invitation.pk).update(accepted_at=timezone.now())
    return membership


def invitation_accept_new_account(*, token: str, password: str) -> User:
    """Someone new accepts: their account is made with the password they chose at the link, and joins. An address
    that got an account meanwhile (another organization's invitation) signs in and accepts instead."""
    exists = _problem(
        "account_exists", "This address has an account now: sign in with it, then accept the invitation.", status=409
    )
    with transaction.atomic():
        invitation = _claim(token)
        if User.objects.filter(email=invitation.email).exists():
            raise exists
        try:
            with transaction.atomic():
                user = User.objects.create_user(invitation.email, password)
        except IntegrityError:  # made by a concurrent acceptance of another organization's invitation
            raise exists from None
        Membership.objects.create(organization=invitation.organization, user=user, role=invitation.role)
        Invitation.objects.filter(pk=invitation.pk).update(accepted_at=timezone.now())
    return user
