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


# What a tenant may be told of a failed call (a run's last_error, an API error): a code it can act on and neutral
# words. Never an address, what a name resolved to, or the deny list's ranges: shown to a tenant (even through a
# publishable key in a browser), those would map the operator's network. The full reason (`EgressError.message`)
# goes to the server log, and the code and address to the egress log (EgressEvent).
TENANT_MESSAGES = {
    "url_not_allowed": "the URL is not allowed (https:// only, port 443 or 8443, a plain host name)",
    "address_not_allowed": "the host name does not resolve to an address K-Agent calls (it may not exist, or it "
    "names a private, internal or reserved address)",
    "upstream_failed": "the server could not be reached or did not answer properly",
}


def shown_code(code: str) -> str:
    """An egress code as a tenant may see it (the egress log, a tool call's step, a delivery's log, a knowledge
    fetch): a name that doesn't resolve and a name that resolves to our network read the same, or a tenant could
    learn which internal names exist (second security review, item 9). The egress log row keeps the real code, for
    the operator."""
    return "address_not_allowed" if code == "dns_failed" else code


def tenant_code(code: str) -> str:
    """The code a tenant is shown for an egress code: one of TENANT_MESSAGES."""
    code = shown_code(code)
    return code if code in TENANT_MESSAGES else "upstream_failed"


def tenant_message(error: EgressError) -> str:
    """`"<code>: <neutral words>"` for `error`, safe to show a tenant."""
    code = tenant_code(error.code)
    return f"{code}: {TENANT_MESSAGES[code]}"
