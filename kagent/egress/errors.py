"""EgressError, the one exception of the outbound client, and which of its codes are refusals by policy."""

from __future__ import annotations

# Codes of refusals decided by policy (EgressEvent.decision = refused); every other code is a call that was made.
REFUSAL_CODES = frozenset(
    {
        "url_not_allowed",
        "address_not_allowed",
        "dns_failed",
        "invalid_request",
        "header_not_allowed",
        "egress_misconfigured",
    }
)


class EgressError(Exception):
    """A refused or failed outbound call. `code` is stable:

    url_not_allowed, address_not_allowed, dns_failed, invalid_request, header_not_allowed, egress_misconfigured
    (refused before anything was sent); connect_failed, tls_failed, timeout, redirect_not_followed,
    response_too_large, bad_response (the call was attempted).
    `may_have_reached_upstream` is True once request bytes were written on a connection.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        resolved_address: str = "",
        status: int | None = None,
        may_have_reached_upstream: bool = False,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.resolved_address = resolved_address
        self.status = status
        self.may_have_reached_upstream = may_have_reached_upstream
