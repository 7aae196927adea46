"""How a name becomes addresses: the system resolver on a bounded pool per process (getaddrinfo has no timeout),
and the test-only KAGENT_EGRESS_RESOLVE overrides. The answers are checked by the caller (`transport`), not here."""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

Resolver = Callable[[str, int], Sequence[str]]


def parse_resolve(raw: str) -> dict[tuple[str, int], tuple[str, ...]]:
    """curl-style `host:port:addr[,addr…]` entries, separated by whitespace; IPv6 addresses in brackets."""
    out: dict[tuple[str, int], tuple[str, ...]] = {}
    for entry in raw.split():
        host, sep1, rest = entry.partition(":")
        port_text, sep2, addresses = rest.partition(":")
        if not (host and sep1 and sep2 and port_text.isdigit() and addresses):
            raise ValueError(f"bad KAGENT_EGRESS_RESOLVE entry {entry!r}")
        parsed = tuple(str(ipaddress.ip_address(a.strip().strip("[]"))) for a in addresses.split(",") if a.strip())
        out[(host.lower(), int(port_text))] = parsed
    return out


# getaddrinfo has no timeout of its own: lookups run on a small pool and are waited for at most the time left.
# One pool per process: a forked worker must not inherit a pool whose threads stayed in the parent.
_dns_pools: dict[int, ThreadPoolExecutor] = {}
_dns_lock = threading.Lock()
DNS_BACKLOG = 64  # lookups queued or running per process
_dns_slot_counters: dict[int, threading.BoundedSemaphore] = {}


def dns_pool() -> ThreadPoolExecutor:
    pid = os.getpid()
    with _dns_lock:
        pool = _dns_pools.get(pid)
        if pool is None:
            _dns_pools.clear()
            pool = _dns_pools[pid] = ThreadPoolExecutor(max_workers=8, thread_name_prefix="egress-dns")
        return pool


def dns_slots() -> threading.BoundedSemaphore:
    pid = os.getpid()
    with _dns_lock:
        slots = _dns_slot_counters.get(pid)
        if slots is None:
            _dns_slot_counters.clear()
            slots = _dns_slot_counters[pid] = threading.BoundedSemaphore(DNS_BACKLOG)
        return slots


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    out: list[str] = []
    for family, _type, _proto, _canon, sockaddr in infos:
        if family == socket.AF_INET6 and len(sockaddr) >= 4 and sockaddr[3]:
            out.append(f"{sockaddr[0]}%{sockaddr[3]}")  # scoped: refused by the address check
        else:
            out.append(str(sockaddr[0]))
    return out
