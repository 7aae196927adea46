"""Which addresses may be reached: the deny list (with IPv4 unwrapped from IPv6), and `EgressPolicy`, the egress
settings of one moment (test-only allow list, the service's own hosts, --resolve entries, CA) parsed."""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from kagent.egress.errors import EgressError
from kagent.egress.resolver import parse_resolve

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_DENIED_V4 = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "192.0.0.0/24",  # IETF protocol assignments (DS-Lite, NAT64 discovery…)
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated, RFC 7526)
        "198.18.0.0/15",
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, includes broadcast 255.255.255.255
    )
)
_DENIED_V6 = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::1/128",
        "::/128",
        "fc00::/7",  # unique local
        "fe80::/10",  # link local
        "fec0::/10",  # deprecated site local (is_global says True)
        "ff00::/8",  # multicast
        "64:ff9b:1::/48",  # local-use NAT64 (RFC 8215): every embedding format; never a public destination
        "::ffff:0:0:0/96",  # SIIT IPv4-translated addresses (RFC 7915): never a public destination
        "100::/64",  # discard-only (RFC 6666)
        "2001::/23",  # IETF protocol assignments: all of Teredo 2001::/32, benchmarking, ORCHID, AMT…
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation (RFC 9637)
        "5f00::/16",  # SRv6 segment identifiers (RFC 9602)
    )
)
_V4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_V4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")
_SIIT = ipaddress.IPv6Network("::ffff:0:0:0/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses carried inside an IPv6 address (mapped, compatible, SIIT, NAT64, 6to4, Teredo). Teredo and SIIT
    are denied whole; they are unwrapped too so the reason, and the check for the service's own hosts, name what
    they carry."""
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _V4_MAPPED or ip in _V4_COMPATIBLE or ip in _SIIT or ip in _NAT64:
        return [low32]
    if ip in _SIX_TO_FOUR:
        return [ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF)]
    if ip in _TEREDO:
        teredo = ip.teredo
        assert teredo is not None
        return list(teredo)  # server and (de-obfuscated) client
    return []


def address_denial(ip: IPAddress) -> str | None:
    """Why `ip` is in a denied range (ignoring the test-only allow list), or None."""
    if isinstance(ip, ipaddress.IPv4Address):
        for net in _DENIED_V4:
            if ip in net:
                return f"{ip} is in denied range {net}"
        return None
    if ip.scope_id:
        return "IPv6 zone ids are not allowed"
    for net6 in _DENIED_V6:
        if ip in net6:
            return f"{ip} is in denied range {net6}"
    for inner in _embedded_ipv4(ip):
        reason = address_denial(inner)
        if reason:
            return f"{ip} embeds {inner}: {reason}"
    return None


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.replace(",", " ").split()
    return [str(v).strip() for v in value if str(v).strip()]


@dataclass
class EgressPolicy:
    """The egress settings of one moment, parsed. A pool is built per policy (see the package docstring)."""

    allow_networks: tuple[IPNetwork, ...] = ()
    own_names: tuple[str, ...] = ()
    own_networks: tuple[IPNetwork, ...] = ()
    resolve: dict[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)
    ca_bundle: str = ""

    @classmethod
    def from_settings(cls) -> EgressPolicy:
        try:
            allow_raw = _as_list(settings.KAGENT_EGRESS_ALLOW_NETWORKS)
            allow = tuple(ipaddress.ip_network(n, strict=False) for n in allow_raw)
            own_names: list[str] = []
            own_networks: list[IPNetwork] = []
            for entry in _as_list(getattr(settings, "KAGENT_OWN_HOSTS", [])):
                entry = entry.lower().rstrip(".")
                if "/" in entry and not entry[0].isdigit() or "://" in entry:
                    raise ValueError(f"KAGENT_OWN_HOSTS entries are host names, addresses or CIDRs, not {entry!r}")
                try:
                    own_networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                except ValueError:
                    own_names.append(entry.split(":")[0])
            return cls(
                allow_networks=allow,
                own_names=tuple(own_names),
                own_networks=tuple(own_networks),
                resolve=parse_resolve(settings.KAGENT_EGRESS_RESOLVE or ""),
                ca_bundle=(settings.KAGENT_EGRESS_CA_BUNDLE or "").strip(),
            )
        except (ValueError, TypeError) as exc:
            logger.error("egress settings are invalid: %s", exc)
            raise EgressError("egress_misconfigured", "the egress settings are invalid") from exc

    def is_own_host(self, host: str) -> bool:
        return any(host == name or host.endswith("." + name) for name in self.own_names)

    def denial(self, ip: IPAddress) -> str | None:
        # The service's own addresses, also when carried inside an IPv6 address (::ffff:a.b.c.d, NAT64, 6to4, …).
        inner = _embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else []
        if any(
            candidate in net
            for candidate in (ip, *inner)
            for net in self.own_networks
            if candidate.version == net.version
        ):
            return f"{ip} is one of K-Agent's own hosts"
        if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
            return "IPv6 zone ids are not allowed"
        if any(ip.version == net.version and ip in net for net in self.allow_networks):
            return None
        return address_denial(ip)
