"""The address of the client making a request. Behind a TLS proxy every request comes from the proxy: its
X-Forwarded-For says who it forwarded for, and is believed only from the proxies listed in
`KAGENT_TRUSTED_PROXIES` (anyone else can write that header)."""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _trusted(configured: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(item, strict=False) for item in configured)


def _is_trusted(address: str) -> bool:
    networks = _trusted(tuple(settings.KAGENT_TRUSTED_PROXIES))
    if not networks:
        return False
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(request: HttpRequest) -> str:
    """REMOTE_ADDR, or — when that is a trusted proxy — the last address in X-Forwarded-For that isn't one
    (walking from the right: the entries on the left were written by whoever the proxy talked to)."""
    remote = str(request.META.get("REMOTE_ADDR", ""))
    if not _is_trusted(remote):
        return remote
    forwarded = [part.strip() for part in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")]
    for candidate in reversed([part for part in forwarded if part]):
        if not _is_trusted(candidate):
            try:
                return str(ipaddress.ip_address(candidate))
            except ValueError:
                return remote  # a proxy we trust passed on garbage: count it against the proxy
    return remote
