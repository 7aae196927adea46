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


# getaddrinfo has no timeout of its own and can't be abandoned: a lookup nobody waits for any more still holds its
# thread until the system resolver gives up (tens of seconds for a name whose DNS never answers). So lookups are
# admitted, not queued: at most DNS_BACKLOG at a time per process, each on a thread of its own at once (the pool has
# as many threads), and at most DNS_PER_PROJECT of one project and DNS_PER_HOST of one name among them. A tenant
# whose DNS is black-holed holds a few threads and is refused at once beyond them; every other tenant keeps the rest.
# One pool and one count per process: a forked worker must not inherit threads that stayed in the parent.
DNS_BACKLOG = 64  # lookups running per process
DNS_PER_PROJECT = 4  # of them, for one project (calls without a project share one allowance)
DNS_PER_HOST = 2  # of them, for one name, whoever asks: a broken name takes at most half a project's allowance


class DnsAdmission:
    """Counts the lookups in flight per process, per project and per host; admits one only within all three."""

    def __init__(self, *, total: int = DNS_BACKLOG, per_project: int = DNS_PER_PROJECT, per_host: int = DNS_PER_HOST):
        self.total, self.per_project, self.per_host = total, per_project, per_host
        self._lock = threading.Lock()
        self._running = 0
        self._projects: dict[str, int] = {}
        self._hosts: dict[str, int] = {}

    def try_admit(self, *, project: str, host: str) -> str | None:
        """None when admitted (call `release` when the lookup ends), else which limit refused it."""
        with self._lock:
            if self._running >= self.total:
                return "lookups in this process"
            if self._projects.get(project, 0) >= self.per_project:
                return "lookups of this project"
            if self._hosts.get(host, 0) >= self.per_host:
                return "lookups of this host"
            self._running += 1
            self._projects[project] = self._projects.get(project, 0) + 1
            self._hosts[host] = self._hosts.get(host, 0) + 1
            return None

    def release(self, *, project: str, host: str) -> None:
        with self._lock:
            self._running -= 1
            for counts, key in ((self._projects, project), (self._hosts, host)):
                counts[key] -= 1
                if not counts[key]:
                    del counts[key]


_dns_lock = threading.Lock()
_dns_state: dict[int, tuple[ThreadPoolExecutor, DnsAdmission]] = {}


def dns_pool() -> tuple[ThreadPoolExecutor, DnsAdmission]:
    """This process's lookup threads and the count that admits lookups to them."""
    pid = os.getpid()
    with _dns_lock:
        state = _dns_state.get(pid)
        if state is None:
            _dns_state.clear()
            admission = DnsAdmission()
            pool = ThreadPoolExecutor(max_workers=admission.total, thread_name_prefix="egress-dns")
            state = _dns_state[pid] = (pool, admission)
        return state


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    out: list[str] = []
    for family, _type, _proto, _canon, sockaddr in infos:
        if family == socket.AF_INET6 and len(sockaddr) >= 4 and sockaddr[3]:
            out.append(f"{sockaddr[0]}%{sockaddr[3]}")  # scoped: refused by the address check
        else:
            out.append(str(sockaddr[0]))
    return out
