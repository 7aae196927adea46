"""The hardened outbound client: the one way K-Agent reaches a URL a tenant configured (SPEC §6, seed "Network limits").

HTTP tools, API knowledge sources, webhooks and tenant model `base_url`s all go through `get_client().request(...)`.

How a call is guarded, in order:
1. The URL string is checked before anything else (`url_check`): `https://` only, an authority that is exactly
   `host`, `host:443` or `host:8443` written plainly (no userinfo, no backslash, no percent-encoding, no zone id, no
   non-ASCII such as unicode dots, no alternate IPv4 spellings), no fragment, no `.`/`..` path segments; then the
   parsed `httpx.URL` must agree with what was read. The service's own hosts (`KAGENT_OWN_HOSTS`) are refused.
2. The name is resolved ONCE, inside the connection pool's network backend (`_GuardedBackend.connect_tcp`). If any
   answer is denied (or there is none) the call is refused. The socket connects to exactly an address that was
   checked; httpcore then does TLS with `server_hostname` = the URL's host, and httpx sends `Host` from the URL, so
   SNI, certificate verification and Host keep the hostname. No second lookup exists that could be rebound.
3. One deadline (`timeout_ms`, at most 15 s) covers the whole exchange: every socket operation of the connection
   (connect at most 3 s, TLS handshake, writes, each read) gets only the time left, so a server trickling bytes
   cannot stretch it; the body loop checks it again between chunks.
4. The response: a 3xx is refused (`redirect_not_followed`), Content-Length over 1 MiB is refused before the body is
   read, then the body is decoded here, chunk by chunk, with a bounded decompressor, and refused as soon as the
   decoded size passes 1 MiB (a gzip bomb never inflates past the limit in memory).

Connection reuse and rebinding. Connections are pooled per origin (scheme, host, port) as httpcore does, so a
connection made for one name never carries another name's request. A pooled connection stays connected to the
address that was checked when it was opened; a later, different DNS answer only matters to new connections, which
resolve and check again. What could change a decision for the same address is the policy (allowed networks, own
hosts, --resolve entries, CA): each policy gets its own pool (`_policy_transport`), and every request re-checks the
address of the connection it is written on against the policy of the request (`_GuardedStream.write`) before a
byte is sent, so a connection opened under one decision can never serve a request under another.

Test-only settings (SPEC §2): KAGENT_EGRESS_ALLOW_NETWORKS exempts exactly the CIDRs it names from the deny list;
KAGENT_EGRESS_CA_BUNDLE adds a CA to certifi's; KAGENT_EGRESS_RESOLVE (`host:port:addr[,addr…]` entries, IPv6 in
brackets) replaces DNS for that host:port only, and its addresses still pass the deny list.

Every attempt, made or refused, is recorded as an EgressEvent: host, port, path without the query, resolved
address, decision, code, status, bytes, duration. Never query strings, headers, bodies or secret values.
"""

from __future__ import annotations

import contextvars
import http.cookiejar
import ipaddress
import logging
import os
import re
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote

import certifi
import httpcore
import httpx
from django.conf import settings
from httpcore._backends.sync import SyncStream

from kagent.masking import mask_secrets

logger = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 1024 * 1024
MAX_TIMEOUT_MS = 15_000
CONNECT_TIMEOUT_S = 3.0
MAX_URL_LENGTH = 8192
MAX_REQUEST_BODY_BYTES = 1024 * 1024
ALLOWED_PORTS = {"443": 443, "8443": 8443}
ALLOWED_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
USER_AGENT = "K-Agent/1"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]

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


@dataclass(frozen=True)
class EgressResponse:
    status: int
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    body: bytes  # decoded (gzip/deflate undone), at most 1 MiB
    resolved_address: str
    duration_ms: int


@dataclass(frozen=True)
class TargetUrl:
    url: httpx.URL
    host: str  # lower case; an IPv6 literal without brackets
    port: int
    path: str  # without the query


# --- URL checks ------------------------------------------------------------------------------------------------

_LABEL_RE = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_NUMERIC_LABEL_RE = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
_CANONICAL_OCTET_RE = re.compile(r"^(?:0|[1-9][0-9]{0,2})$")
_URL_CHARS_RE = re.compile(r"^[\x21-\x7e]+$")  # printable ASCII, no space
_SCHEME = "https://"


def _refuse_url(message: str) -> EgressError:
    return EgressError("url_not_allowed", message)


def _check_host(host: str) -> tuple[str, IPAddress | None]:
    """The host as written in the authority -> (normalised host, IP literal or None)."""
    if host.startswith("["):
        if not host.endswith("]"):
            raise _refuse_url("malformed IPv6 literal")
        try:
            ip6 = ipaddress.IPv6Address(host[1:-1])
        except ValueError as exc:
            raise _refuse_url("malformed IPv6 literal") from exc
        if ip6.scope_id:
            raise _refuse_url("IPv6 zone ids are not allowed")
        return str(ip6), ip6
    host = host.lower()
    if not host or len(host) > 253:
        raise _refuse_url("missing or over-long host")
    if host.endswith("."):
        raise _refuse_url("a host may not end with a dot")
    labels = host.split(".")
    if _NUMERIC_LABEL_RE.match(labels[-1]):
        # Looks like an IPv4 address: only the canonical dotted quad is accepted. 127.1, 0x7f.1, 2130706433,
        # 0177.0.0.1 and 127.000.0.1 all mean 127.0.0.1 to some resolver; refusing them leaves nothing to argue.
        if len(labels) != 4 or not all(_CANONICAL_OCTET_RE.match(p) and int(p) <= 255 for p in labels):
            raise _refuse_url("IPv4 addresses must be written as four plain decimal numbers")
        return host, ipaddress.IPv4Address(host)
    if not all(_LABEL_RE.match(label) for label in labels):
        raise _refuse_url("the host is not a valid DNS name (use punycode for international names)")
    return host, None


def _has_dot_segment(path: str) -> bool:
    for segment in path.split("/"):
        decoded = segment
        for _ in range(3):  # %252e: decode a few times, nothing legitimate needs it
            decoded = unquote(decoded)
        if decoded in (".", ".."):
            return True
    return False


def url_check(url: str) -> TargetUrl:
    """Parse and check a tenant URL without any network access. Raises EgressError(url_not_allowed)."""
    if not isinstance(url, str) or not url:
        raise _refuse_url("the URL must be a non-empty string")
    if len(url) > MAX_URL_LENGTH:
        raise _refuse_url("the URL is too long")
    if not _URL_CHARS_RE.match(url):
        raise _refuse_url("the URL may only hold printable ASCII without spaces (unicode dots, controls...)")
    if "\\" in url:
        raise _refuse_url("backslashes are not allowed in URLs")
    if url[: len(_SCHEME)].lower() != _SCHEME:
        raise _refuse_url("only https:// URLs are allowed")
    rest = url[len(_SCHEME) :]
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    if "@" in authority:
        raise _refuse_url("user information in URLs is not allowed")
    if "%" in authority:
        raise _refuse_url("percent-encoding and zone ids are not allowed in the host")
    if "#" in tail:
        raise _refuse_url("URL fragments are not allowed")
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise _refuse_url("malformed IPv6 literal")
        raw_host, after = authority[: end + 1], authority[end + 1 :]
    else:
        raw_host, sep, port_text = authority.partition(":")
        after = sep + port_text
    if after:
        if not after.startswith(":") or after[1:] not in ALLOWED_PORTS:
            raise _refuse_url("only ports 443 and 8443 are allowed, written plainly")
        port = ALLOWED_PORTS[after[1:]]
    else:
        port = 443
    host, literal = _check_host(raw_host)
    path = tail.split("?", 1)[0] or "/"
    if not path.startswith("/"):
        raise _refuse_url("malformed path")
    if _has_dot_segment(path):
        raise _refuse_url("the path may not contain . or .. segments")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
        raise _refuse_url("the URL does not parse") from exc
    # What httpx will actually use must be exactly what was checked above.
    expected_port = None if port == 443 else port
    try:
        if literal is None or literal.version == 4:
            same_host = parsed.host == host
        else:
            same_host = ipaddress.ip_address(parsed.host) == literal
    except ValueError:
        same_host = False
    if parsed.scheme != "https" or not same_host or parsed.port != expected_port or parsed.userinfo or parsed.fragment:
        raise _refuse_url("the URL is ambiguous")
    return TargetUrl(url=parsed, host=host, port=port, path=path)


# --- Address policy --------------------------------------------------------------------------------------------

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
        "198.18.0.0/15",
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
    )
)
_V4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_V4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses carried inside an IPv6 address (mapped, compatible, NAT64, 6to4, Teredo)."""
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _V4_MAPPED or ip in _V4_COMPATIBLE or ip in _NAT64:
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
    """The egress settings of one moment, parsed. A pool is built per policy (see the module docstring)."""

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
                resolve=_parse_resolve(settings.KAGENT_EGRESS_RESOLVE or ""),
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


def _parse_resolve(raw: str) -> dict[tuple[str, int], tuple[str, ...]]:
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


# --- DNS ----------------------------------------------------------------------------------------------------------

# getaddrinfo has no timeout of its own: lookups run on a small pool and are waited for at most the time left.
# One pool per process: a forked worker must not inherit a pool whose threads stayed in the parent.
_dns_pools: dict[int, ThreadPoolExecutor] = {}
_dns_lock = threading.Lock()
DNS_BACKLOG = 64  # lookups queued or running per process
_dns_slot_counters: dict[int, threading.BoundedSemaphore] = {}


def _dns_pool() -> ThreadPoolExecutor:
    pid = os.getpid()
    with _dns_lock:
        pool = _dns_pools.get(pid)
        if pool is None:
            _dns_pools.clear()
            pool = _dns_pools[pid] = ThreadPoolExecutor(max_workers=8, thread_name_prefix="egress-dns")
        return pool


def _dns_slots() -> threading.BoundedSemaphore:
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


# --- One exchange's state, seen by the network backend of the thread running it ---------------------------------


@dataclass
class _Exchange:
    policy: EgressPolicy
    deadline: float  # time.monotonic()
    sent: bool = False
    peer: str = ""

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def clamp(self, timeout: float | None, exc: type[Exception]) -> float:
        left = self.remaining()
        if left <= 0:
            raise exc("the call's deadline has passed")
        return left if timeout is None else min(timeout, left)


_EXCHANGE: contextvars.ContextVar[_Exchange | None] = contextvars.ContextVar("kagent_egress_exchange", default=None)


class _GuardedStream(httpcore.NetworkStream):
    """A connection to one checked address; every operation gets at most the time left of the current exchange."""

    def __init__(self, inner: httpcore.NetworkStream, address: str, policy: EgressPolicy) -> None:
        self._inner = inner
        self.address = address
        self.policy = policy

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        exchange = _EXCHANGE.get()
        if exchange is not None:
            timeout = exchange.clamp(timeout, httpcore.ReadTimeout)
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        exchange = _EXCHANGE.get()
        if exchange is not None:
            if exchange.policy is not self.policy and exchange.policy.denial(ipaddress.ip_address(self.address)):
                raise EgressError(
                    "address_not_allowed",
                    "the pooled connection's address is not allowed",
                    resolved_address=self.address,
                )
            timeout = exchange.clamp(timeout, httpcore.WriteTimeout)
            exchange.peer = self.address
            exchange.sent = True
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        exchange = _EXCHANGE.get()
        if exchange is not None:
            timeout = exchange.clamp(timeout, httpcore.ConnectTimeout)
        try:
            tls = self._inner.start_tls(ssl_context, server_hostname=server_hostname, timeout=timeout)
        except httpcore.ConnectTimeout:
            raise
        except (httpcore.ConnectError, ssl.SSLError, OSError) as exc:
            raise EgressError(
                "tls_failed", f"TLS with {server_hostname} failed", resolved_address=self.address
            ) from exc
        return _GuardedStream(tls, self.address, self.policy)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _GuardedBackend(httpcore.NetworkBackend):
    """connect_tcp = resolve once, refuse if any answer is denied, connect to exactly a checked address."""

    def __init__(self, policy: EgressPolicy, resolver: Resolver) -> None:
        self.policy = policy
        self.resolver = resolver

    def _resolve(self, host: str, port: int, exchange: _Exchange | None) -> list[str]:
        override = self.policy.resolve.get((host, port))
        if override is not None:
            return list(override)
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            return [str(literal)]
        budget = CONNECT_TIMEOUT_S if exchange is None else min(CONNECT_TIMEOUT_S, max(exchange.remaining(), 0.001))
        # A name whose DNS never answers must not starve everyone else's lookups: the backlog is bounded, and a
        # lookup nobody waits for any more is cancelled if it hasn't started.
        slots = _dns_slots()
        if not slots.acquire(blocking=False):
            raise EgressError("timeout", f"too many lookups in flight; resolving {host} was not attempted")
        future = _dns_pool().submit(self.resolver, host, port)
        future.add_done_callback(lambda _: slots.release())
        try:
            return list(future.result(timeout=budget))
        except FutureTimeout as exc:
            future.cancel()
            raise EgressError("timeout", f"resolving {host} took too long") from exc
        except EgressError:
            raise
        except (OSError, UnicodeError, ValueError) as exc:
            raise EgressError("dns_failed", f"{host} does not resolve") from exc

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        exchange = _EXCHANGE.get()
        host = host.strip("[]").lower()
        answers = self._resolve(host, port, exchange)
        if not answers:
            raise EgressError("dns_failed", f"{host} resolves to nothing")
        addresses: list[IPAddress] = []
        for answer in answers:
            try:
                ip = ipaddress.ip_address(answer)
            except ValueError as exc:
                raise EgressError("dns_failed", f"{host} resolved to something that is not an address") from exc
            reason = self.policy.denial(ip)
            if reason:  # ANY denied answer refuses the whole name
                raise EgressError("address_not_allowed", f"{host}: {reason}", resolved_address=str(ip))
            if ip not in addresses:
                addresses.append(ip)
        last_error: Exception | None = None
        for ip in addresses:
            connect_timeout = CONNECT_TIMEOUT_S if timeout is None else min(timeout, CONNECT_TIMEOUT_S)
            if exchange is not None:
                connect_timeout = exchange.clamp(connect_timeout, httpcore.ConnectTimeout)
            family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            try:
                sock.settimeout(connect_timeout)
                sock.connect((str(ip), port))  # the checked address itself: no name, no second lookup
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except TimeoutError as exc:
                sock.close()
                last_error = exc
                if exchange is not None and exchange.remaining() <= 0:
                    break
                continue
            except OSError as exc:
                sock.close()
                last_error = exc
                continue
            return _GuardedStream(SyncStream(sock), str(ip), self.policy)
        if isinstance(last_error, TimeoutError):
            raise httpcore.ConnectTimeout(f"connecting to {host} timed out")
        raise EgressError("connect_failed", f"could not connect to {host}", resolved_address=str(addresses[-1]))

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise EgressError("url_not_allowed", "unix sockets are not reachable")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _ssl_context(ca_bundle: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certifi.where())
    if ca_bundle:
        context.load_verify_locations(cafile=ca_bundle)  # in addition to the default trust
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class _ResponseStream(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Any:
        with _map_httpcore_errors():
            yield from self._stream

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class _map_httpcore_errors:  # noqa: N801 - used as a context manager
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        if exc is None or isinstance(exc, EgressError) or not isinstance(exc, Exception):
            return False
        exchange = _EXCHANGE.get()
        sent = bool(exchange and exchange.sent)
        peer = exchange.peer if exchange else ""
        if isinstance(exc, httpcore.TimeoutException | httpx.TimeoutException):
            raise EgressError(
                "timeout", "the call did not finish in time", resolved_address=peer, may_have_reached_upstream=sent
            ) from exc
        if isinstance(exc, httpcore.ConnectError | httpx.ConnectError):
            raise EgressError("connect_failed", "the connection failed", resolved_address=peer) from exc
        if isinstance(exc, httpcore.UnsupportedProtocol):
            raise EgressError("url_not_allowed", "unsupported protocol") from exc
        if isinstance(exc, httpcore.LocalProtocolError | httpx.LocalProtocolError):
            raise EgressError("invalid_request", "the request could not be sent", resolved_address=peer) from exc
        if isinstance(exc, httpcore.NetworkError | httpcore.ProtocolError | httpx.TransportError | OSError):
            raise EgressError(
                "bad_response", "the upstream broke the exchange", resolved_address=peer, may_have_reached_upstream=sent
            ) from exc
        return False


class EgressTransport(httpx.BaseTransport):
    """An httpx transport around an httpcore pool whose every connection comes from `_GuardedBackend`."""

    def __init__(self, *, policy: EgressPolicy, resolver: Resolver) -> None:
        self.policy = policy
        self._pool = httpcore.ConnectionPool(
            ssl_context=_ssl_context(policy.ca_bundle),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=30.0,
            http1=True,
            http2=False,
            retries=0,
            network_backend=_GuardedBackend(policy, resolver),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        extensions = {"timeout": request.extensions.get("timeout", {})}  # never sni_hostname or anything else
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=extensions,
        )
        with _map_httpcore_errors():
            response = self._pool.handle_request(core_request)
        assert isinstance(response.stream, Iterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()


# --- Body decoding with a bound -------------------------------------------------------------------------------


def _undecodable() -> EgressError:
    return EgressError("bad_response", "the response body does not decode", may_have_reached_upstream=True)


def _too_large() -> EgressError:
    return EgressError("response_too_large", "the response is over 1 MiB", may_have_reached_upstream=True)


class _BoundedDecoder:
    """Undo Content-Encoding chunk by chunk, never holding more than `limit` + 1 decoded bytes in total."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.encoding = encoding.strip().lower()
        self._zlib: Any = None
        self._pending = b""  # deflate: bytes seen before the zlib-or-raw decision
        if self.encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self.encoding not in ("", "identity", "deflate"):
            raise EgressError("bad_response", "unsupported content encoding", may_have_reached_upstream=True)

    def _count(self, data: bytes) -> bytes:
        self.size += len(data)
        if self.size > self.limit:
            raise _too_large()
        return data

    def feed(self, data: bytes) -> list[bytes]:
        if self.encoding in ("", "identity"):
            return [self._count(data)]
        if self._zlib is None:  # deflate: a zlib stream, or raw deflate as some servers send
            self._pending += data
            if len(self._pending) < 2:
                return []
            b0, b1 = self._pending[0], self._pending[1]
            wrapped = (b0 & 0x0F) == 8 and ((b0 << 8) | b1) % 31 == 0
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
            data, self._pending = self._pending, b""
        out: list[bytes] = []
        try:
            while data:
                out.append(self._count(self._zlib.decompress(data, self.limit - self.size + 1)))
                data = self._zlib.unconsumed_tail
        except zlib.error as exc:
            raise _undecodable() from exc
        return out

    def flush(self) -> list[bytes]:
        if self.encoding in ("", "identity"):
            return []
        if self._zlib is None:
            if self._pending:
                raise _undecodable()
            return []
        try:
            return [self._count(self._zlib.flush())]
        except zlib.error as exc:
            raise _undecodable() from exc


# --- Recording ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EgressRecord:
    project_id: str | None
    purpose: str
    method: str
    host: str
    port: int | None
    path: str
    resolved_address: str
    decision: str  # allowed | refused
    code: str
    status: int | None
    bytes_received: int
    duration_ms: int


Recorder = Callable[[EgressRecord], None]


def record_event_db(record: EgressRecord) -> None:
    """The default recorder: one EgressEvent row. A failure to record is logged, never raised into the call."""
    from django.db import DatabaseError, connection, transaction

    from kagent.models import EgressEvent

    try:
        values = {
            "project_id": record.project_id,
            "purpose": record.purpose[:30],
            "method": record.method[:10],
            "host": record.host[:255],
            "port": record.port,
            "path": record.path[:500],
            "resolved_address": record.resolved_address[:64],
            "decision": record.decision,
            "code": record.code[:40],
            "status": record.status,
            "bytes_received": record.bytes_received,
            "duration_ms": record.duration_ms,
        }
        if connection.in_atomic_block:  # a savepoint, so a failed insert cannot poison the caller's transaction
            with transaction.atomic():
                EgressEvent.objects.create(**values)
        else:
            EgressEvent.objects.create(**values)
    except DatabaseError:
        logger.exception("could not record an egress event for %s", record.host)


# --- The client -----------------------------------------------------------------------------------------------

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


_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_HEADER_VALUE_RE = re.compile(r"^[\x20-\x7e\t]{0,8192}$")


def _check_headers(headers: dict[str, str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str) or not _HEADER_NAME_RE.match(name):
            raise EgressError("invalid_request", "malformed header name")
        lowered = name.lower()
        if lowered in TRANSPORT_HEADERS or lowered.startswith(FORBIDDEN_HEADER_PREFIXES):
            raise EgressError("header_not_allowed", f"the {name} header is set by K-Agent or not allowed")
        if not _HEADER_VALUE_RE.match(value):
            raise EgressError("invalid_request", f"the {name} header value holds characters that are not allowed")
        out.append((name, value))
    return out


class EgressClient:
    """One per process (`get_client()`): holds the pool, so connections are reused between calls."""

    def __init__(self, *, resolver: Resolver | None = None, recorder: Recorder | None = record_event_db) -> None:
        self._resolver: Resolver = resolver or system_resolver
        self._recorder = recorder
        self._lock = threading.Lock()
        self._fingerprint: tuple[Any, ...] | None = None
        self._policy: EgressPolicy | None = None
        self._client: httpx.Client | None = None
        self._transport: EgressTransport | None = None

    def _policy_client(self) -> tuple[EgressPolicy, httpx.Client, EgressTransport]:
        """The pool for the egress settings in force now; a new one (and the old closed) when they change."""
        fingerprint = (
            repr(settings.KAGENT_EGRESS_ALLOW_NETWORKS),
            settings.KAGENT_EGRESS_CA_BUNDLE,
            settings.KAGENT_EGRESS_RESOLVE,
            repr(getattr(settings, "KAGENT_OWN_HOSTS", [])),
        )
        with self._lock:
            if fingerprint != self._fingerprint or self._client is None or self._policy is None:
                policy = EgressPolicy.from_settings()
                transport = EgressTransport(policy=policy, resolver=self._resolver)
                client = httpx.Client(
                    transport=transport,
                    trust_env=False,
                    follow_redirects=False,
                    # Defence in depth: requests never go through client.send, but a jar that stores nothing means
                    # a long-lived client shared by every tenant can never carry one tenant's cookies to another.
                    cookies=http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[])),
                    headers={"User-Agent": USER_AGENT, "Accept": "*/*"},
                )
                old = self._client
                self._client, self._transport, self._policy, self._fingerprint = client, transport, policy, fingerprint
                if old is not None:
                    old.close()
            assert self._transport is not None
            return self._policy, self._client, self._transport

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
            self._client = self._transport = self._policy = self._fingerprint = None

    def request(
        self,
        *,
        project_id: str | None,
        purpose: str,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout_ms: int,
        secret_values: Sequence[str] = (),
    ) -> EgressResponse:
        """Make one call. Raises EgressError; records every attempt. `secret_values` are masked in the logged path."""
        started = time.monotonic()
        host, port, path = "", None, ""
        outcome: dict[str, Any] = {"status": None, "bytes": 0, "address": ""}
        try:
            host, port, path = _log_target(url)
            target = url_check(url)
            host, port, path = target.host, target.port, target.path
            response = self._send(
                target=target,
                method=method,
                headers=headers,
                body=body,
                timeout_ms=timeout_ms,
                started=started,
                outcome=outcome,
            )
        except EgressError as exc:
            self._record(
                project_id,
                purpose,
                method,
                host,
                port,
                mask_secrets(path, secret_values, replacement="****"),
                exc.resolved_address or outcome["address"],
                exc.code,
                exc.status or outcome["status"],
                outcome["bytes"],
                started,
            )
            raise
        self._record(
            project_id,
            purpose,
            method,
            host,
            port,
            mask_secrets(path, secret_values, replacement="****"),
            response.resolved_address,
            "",
            response.status,
            len(response.body),
            started,
        )
        return response

    def _record(
        self,
        project_id: str | None,
        purpose: str,
        method: str,
        host: str,
        port: int | None,
        path: str,
        address: str,
        code: str,
        status: int | None,
        size: int,
        started: float,
    ) -> None:
        if self._recorder is None:
            return
        decision = "refused" if code in REFUSAL_CODES else "allowed"
        self._recorder(
            EgressRecord(
                project_id=project_id,
                purpose=str(purpose),
                method=str(method)[:10],
                host=host,
                port=port,
                path=path,
                resolved_address=address,
                decision=decision,
                code=code,
                status=status,
                bytes_received=size,
                duration_ms=int((time.monotonic() - started) * 1000),
            )
        )

    def _send(
        self,
        *,
        target: TargetUrl,
        method: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout_ms: int,
        started: float,
        outcome: dict[str, Any],
    ) -> EgressResponse:
        if not isinstance(method, str) or method.upper() not in ALLOWED_METHODS:
            raise EgressError("invalid_request", "the method is not allowed")
        method = method.upper()
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms <= 0:
            raise EgressError("invalid_request", "timeout_ms must be a positive integer")
        if body is not None and (not isinstance(body, bytes) or len(body) > MAX_REQUEST_BODY_BYTES):
            raise EgressError("invalid_request", "the request body must be bytes, at most 1 MiB")
        header_list = _check_headers(headers)
        policy, client, transport = self._policy_client()
        if policy.is_own_host(target.host):
            raise EgressError("url_not_allowed", "K-Agent's own hosts are not reachable")
        deadline = started + min(timeout_ms, MAX_TIMEOUT_MS) / 1000
        exchange = _Exchange(policy=policy, deadline=deadline)
        token = _EXCHANGE.set(exchange)
        try:
            left = max(exchange.remaining(), 0.001)
            request = client.build_request(
                method,
                target.url,
                headers=[*header_list, ("Accept-Encoding", "gzip, deflate")],
                content=body,
                timeout=httpx.Timeout(connect=min(CONNECT_TIMEOUT_S, left), read=left, write=left, pool=left),
            )
            # Straight to the guarded transport: no cookie jar shared between tenants, no URL (with its query) in
            # httpx's request log, no auth or redirect machinery.
            response = transport.handle_request(request)
            response.request = request
            try:
                outcome["status"] = response.status_code
                outcome["address"] = exchange.peer
                if 300 <= response.status_code < 400:
                    raise EgressError(
                        "redirect_not_followed",
                        "the upstream answered with a redirect",
                        status=response.status_code,
                        resolved_address=exchange.peer,
                        may_have_reached_upstream=True,
                    )
                declared = response.headers.get("content-length")
                if declared is not None and declared.strip().isdigit() and int(declared) > MAX_RESPONSE_BYTES:
                    raise EgressError(
                        "response_too_large",
                        "the response is over 1 MiB",
                        status=response.status_code,
                        resolved_address=exchange.peer,
                        may_have_reached_upstream=True,
                    )
                decoder = _BoundedDecoder(response.headers.get("content-encoding", ""), MAX_RESPONSE_BYTES)
                parts: list[bytes] = []
                raw_size = 0
                for chunk in response.iter_raw():
                    raw_size += len(chunk)
                    outcome["bytes"] = raw_size
                    if raw_size > MAX_RESPONSE_BYTES:
                        raise _too_large()
                    parts.extend(decoder.feed(chunk))
                    if time.monotonic() > deadline:
                        raise EgressError("timeout", "the call did not finish in time", may_have_reached_upstream=True)
                parts.extend(decoder.flush())
            except EgressError as exc:
                exc.status = exc.status or response.status_code
                exc.resolved_address = exc.resolved_address or exchange.peer
                exc.may_have_reached_upstream = True
                raise
            finally:
                response.close()
            return EgressResponse(
                status=response.status_code,
                headers={k.lower(): v for k, v in _joined(response.headers.multi_items()).items()},
                body=b"".join(parts),
                resolved_address=exchange.peer,
                duration_ms=int((time.monotonic() - started) * 1000),
            )
        except EgressError as exc:
            if exchange.sent:
                exc.may_have_reached_upstream = True
            exc.resolved_address = exc.resolved_address or exchange.peer
            raise
        except httpx.HTTPError as exc:  # anything httpx raised itself
            raise EgressError(
                "bad_response",
                "the exchange failed",
                resolved_address=exchange.peer,
                may_have_reached_upstream=exchange.sent,
            ) from exc
        finally:
            _EXCHANGE.reset(token)


def _log_target(url: object) -> tuple[str, int | None, str]:
    """Host, port and path for the egress log of a URL that may be refused; never the query or userinfo."""
    try:
        parsed = httpx.URL(url) if isinstance(url, str) else None
    except Exception:  # noqa: BLE001 - only for the log; url_check decides
        return "", None, ""
    if parsed is None:
        return "", None, ""
    try:
        port = parsed.port or 443
    except Exception:  # noqa: BLE001
        port = None
    return parsed.host[:255], port, parsed.path


def _joined(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


_client: EgressClient | None = None
_client_pid: int | None = None
_client_lock = threading.Lock()


def get_client() -> EgressClient:
    """The process's client. A forked worker gets its own (pooled sockets are never shared across processes)."""
    global _client, _client_pid
    pid = os.getpid()
    with _client_lock:
        if _client is None or _client_pid != pid:
            _client, _client_pid = EgressClient(), pid
        return _client
