"""Where links in emails point (invitations, password resets)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from kagent.errors import ApiError


def public_base_url(request: HttpRequest) -> str:
    """KAGENT_PUBLIC_URL; unset, this request's own origin. Its host is the Host header, which Django checks against
    ALLOWED_HOSTS (`get_host`: any other is a 400), so a request naming someone else's host can't have a link to
    that host mailed to a member. With ALLOWED_HOSTS allowing any host that check is void: no mail then, and the
    operator is told to set KAGENT_PUBLIC_URL."""
    if settings.KAGENT_PUBLIC_URL:
        return str(settings.KAGENT_PUBLIC_URL)
    if "*" in settings.ALLOWED_HOSTS:
        message = (
            "Not sent: this server answers to any host name (ALLOWED_HOSTS=*), so it can't tell which one links in "
            "mails should name. Its operator sets KAGENT_PUBLIC_URL."
        )
        raise ApiError("public_url_not_set", message, status=503, details=[{"path": "$", "message": message}])
    return f"{request.scheme}://{request.get_host()}"
