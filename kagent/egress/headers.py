"""Which request headers a caller or a tenant may set, and the check of a call's headers (name, value, who sets it)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from kagent.egress.errors import EgressError

USER_AGENT = "K-Agent/1"

# Headers only the transport sets (or that would let a caller steer a proxy or the framing): refused from any caller.
TRANSPORT_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "forwarded",
        "x-real-ip",
        "expect",
        "accept-encoding",
    }
)
FORBIDDEN_HEADER_PREFIXES = ("x-forwarded-", "proxy-")
SIGNING_HEADERS = frozenset({"webhook-id", "webhook-timestamp", "webhook-signature"})
# What a tenant's template may not set (seed "Templating rules"): the above, plus what K-Agent sends on every call.
TENANT_FORBIDDEN_HEADERS = TRANSPORT_HEADERS | SIGNING_HEADERS | {"user-agent"}


def is_tenant_forbidden_header(name: str) -> bool:
    lowered = name.lower()
    return lowered in TENANT_FORBIDDEN_HEADERS or lowered.startswith(FORBIDDEN_HEADER_PREFIXES)


# linear: anchored, one class, bounded
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}(?!\n)$")
# linear: anchored, one class, bounded
_HEADER_VALUE_RE = re.compile(r"^[\x20-\x7e\t]{0,8192}(?!\n)$")


def check_headers(headers: dict[str, str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str) or not _HEADER_NAME_RE.fullmatch(name):
            raise EgressError("invalid_request", "malformed header name")
        lowered = name.lower()
        if lowered in TRANSPORT_HEADERS or lowered.startswith(FORBIDDEN_HEADER_PREFIXES):
            raise EgressError("header_not_allowed", f"the {name} header is set by K-Agent or not allowed")
        if not _HEADER_VALUE_RE.fullmatch(value):
            raise EgressError("invalid_request", f"the {name} header value holds characters that are not allowed")
        out.append((name, value))
    return out


def joined_headers(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Answer headers by lower-case name, a repeated header's values joined with ", " (as httpx's `Headers` reads
    them)."""
    out: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out
