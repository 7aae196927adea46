"""The connection layer: a name resolved once, refused if any answer is denied, a socket connected to exactly a
checked address, TLS verified for the URL's name, and the exchange itself over `kagent.http1` with every wait held to
the time left of the call's deadline; what `kagent.http1` raises becomes an EgressError."""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import certifi

from kagent import http1
from kagent.egress.addresses import EgressPolicy, IPAddress
from kagent.egress.decoding import too_large
from kagent.egress.errors import EgressError
from kagent.egress.limits import CONNECT_TIMEOUT_S, MAX_RESPONSE_BYTES
from kagent.egress.resolver import Resolver, dns_pool
from kagent.egress.urls import TargetUrl

MAX_IDLE_PER_ORIGIN = 4  # connections kept per origin and process (a worker's child makes one call at a time)
IDLE_EXPIRY_S = 30.0  # a kept connection idle longer is closed
# Origins kept per transport, the least recently used forgotten (their idle connections closed) past it: a tenant
# calling a new name each time (a wildcard DNS zone) must not make the process keep a socket per name, up to its
# file descriptor limit, for the next 30 s (httpcore's pool, before kagent.http1, kept at most 20 idle in all).
MAX_ORIGINS = 16
_PRUNE_EVERY_S = 5.0


@dataclass
class Exchange:
    policy: EgressPolicy
    deadline: float  # time.monotonic()
    project_id: str = ""  # whose call: DNS lookups are admitted per project
    sent: bool = False  # request bytes were written on a connection
    peer: str = ""  # the address of the connection the request was written on
    received: int = 0  # of an answer cut off (its size, the deadline, a broken exchange), the body's bytes read
    connection: http1.Connection | None = None  # the one the request was written on

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def cut_off(self) -> None:
        """The answer ended early (the deadline, a broken exchange): how much of its body came, for the egress log."""
        self.received = self.connection.body_read if self.connection is not None else 0


class _GuardedBackend:
    """`connect` = resolve once, refuse if any answer is denied, connect to exactly a checked address."""

    def __init__(self, policy: EgressPolicy, resolver: Resolver) -> None:
        self.policy = policy
        self.resolver = resolver

    def _resolve(self, host: str, port: int, exchange: Exchange) -> list[str]:
        override = self.policy.resolve.get((host, port))
        if override is not None:
            return list(override)
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            return [str(literal)]
        budget = min(CONNECT_TIMEOUT_S, max(exchange.remaining(), 0.001))
        # A name whose DNS never answers must not starve anyone else's lookups (resolver.py): admitted per process,
        # per project and per host, or refused at once; never queued behind lookups that hang.
        project = exchange.project_id
        pool, admission = dns_pool()
        refused_by = admission.try_admit(project=project, host=host)
        if refused_by is not None:
            raise EgressError("timeout", f"too many {refused_by} in flight; resolving {host} was not attempted")
        try:
            future = pool.submit(self.resolver, host, port)
        except RuntimeError:  # the pool is shut down (interpreter exit)
            admission.release(project=project, host=host)
            raise
        future.add_done_callback(lambda _: admission.release(project=project, host=host))
        try:
            return list(future.result(timeout=budget))
        except FutureTimeout as exc:
            raise EgressError("timeout", f"resolving {host} took too long") from exc
        except EgressError:
            raise
        except (OSError, UnicodeError, ValueError) as exc:
            raise EgressError("dns_failed", f"{host} does not resolve") from exc

    def connect(self, host: str, port: int, exchange: Exchange) -> http1.Connection:
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
        timed_out = False  # the last address tried timed out (or no time was left to try one)
        for ip in addresses:
            left = exchange.remaining()
            if left <= 0:
                timed_out = True
                break
            family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            try:
                sock.settimeout(min(CONNECT_TIMEOUT_S, left))
                sock.connect((str(ip), port))  # the checked address itself: no name, no second lookup
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except TimeoutError:
                sock.close()
                timed_out = True
                continue
            except OSError:
                sock.close()
                timed_out = False
                continue
            except BaseException:
                sock.close()
                raise
            return http1.Connection(sock, address=str(ip))
        if timed_out:
            raise EgressError("timeout", f"connecting to {host} timed out")
        raise EgressError("connect_failed", f"could not connect to {host}", resolved_address=str(addresses[-1]))


def _ssl_context(ca_bundle: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certifi.where())
    if ca_bundle:
        context.load_verify_locations(cafile=ca_bundle)  # in addition to the default trust
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _start_tls(connection: http1.Connection, context: ssl.SSLContext, host: str, exchange: Exchange) -> None:
    """TLS on a new connection, verified for `host` (SNI and the certificate's name), within the connect timeout and
    the time left (a server that accepts and stalls the handshake holds the call 3 s, as under httpcore, not 15)."""
    sock = connection.sock
    try:
        left = exchange.remaining()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(min(CONNECT_TIMEOUT_S, left))
        # The handshake inside this `try` (not in wrap_socket, which closes only on OSError): whatever interrupts
        # it, a Celery soft time limit included, the socket is closed here.
        sock = context.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
        sock.do_handshake()
    except TimeoutError as exc:
        sock.close()
        raise EgressError(
            "timeout", f"TLS with {host} did not finish in time", resolved_address=connection.address
        ) from exc
    except (ssl.SSLError, OSError, ValueError) as exc:
        sock.close()
        raise EgressError("tls_failed", f"TLS with {host} failed", resolved_address=connection.address) from exc
    except BaseException:
        sock.close()
        raise
    connection.sock = sock


class EgressTransport:
    """Keep-alive connections per origin (`kagent.http1.Endpoint`), every new one from `_GuardedBackend` and TLS
    verified for the URL's name; one transport per policy (`EgressClient._policy_transport`)."""

    def __init__(self, *, policy: EgressPolicy, resolver: Resolver) -> None:
        self.policy = policy
        self._backend = _GuardedBackend(policy, resolver)
        self._tls = _ssl_context(policy.ca_bundle)
        self._lock = threading.Lock()
        self._endpoints: dict[tuple[str, int], http1.Endpoint] = {}
        self._users: dict[tuple[str, int], int] = {}  # exchanges under way per origin: pruned only when none
        self._closed = False  # replaced (the policy changed) or shut: nothing more is kept
        self._pruned = time.monotonic()

    def send(
        self,
        exchange: Exchange,
        method: str,
        target: TargetUrl,
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        on_head: http1.Head,
        on_body: http1.Body | None = None,
    ) -> http1.Answer:
        """One exchange with `target`, its answer's body read whole (at most MAX_RESPONSE_BYTES as sent; given to
        `on_body` as it arrives too, for a streamed answer). Sets
        `exchange.sent` and `exchange.peer` once a byte is about to be written. Raises EgressError only."""
        key = (target.host, target.port)
        endpoint = self._enter(key, target)

        def connect() -> http1.Connection:
            connection = self._backend.connect(target.host, target.port, exchange)
            _start_tls(connection, self._tls, target.host, exchange)
            return connection

        def before_write(connection: http1.Connection) -> None:
            # Defence in depth below the per-policy transports: a connection opened under a policy that allowed its
            # address never carries a request of a policy that denies it.
            if exchange.policy is not self.policy and exchange.policy.denial(ipaddress.ip_address(connection.address)):
                raise EgressError(
                    "address_not_allowed",
                    "the pooled connection's address is not allowed",
                    resolved_address=connection.address,
                )
            exchange.peer = connection.address
            exchange.sent = True
            exchange.connection = connection

        try:
            return endpoint.send(
                method,
                target.request_target,
                headers,
                body,
                deadline=exchange.deadline,
                max_body=MAX_RESPONSE_BYTES,
                connect=connect,
                before_write=before_write,
                on_head=on_head,
                on_body=on_body,
            )
        except EgressError:
            raise
        except http1.TooLarge as exc:
            exchange.received = exc.received
            raise too_large() from exc
        except TimeoutError as exc:
            exchange.cut_off()
            raise EgressError(
                "timeout",
                "the call did not finish in time",
                resolved_address=exchange.peer,
                may_have_reached_upstream=exchange.sent,
            ) from exc
        except (http1.ProtocolFault, OSError) as exc:
            exchange.cut_off()
            raise EgressError(
                "bad_response",
                "the upstream broke the exchange",
                resolved_address=exchange.peer,
                may_have_reached_upstream=exchange.sent,
            ) from exc
        finally:
            self._leave(key)

    def _enter(self, key: tuple[str, int], target: TargetUrl) -> http1.Endpoint:
        with self._lock:
            endpoint = self._endpoints.pop(key, None)  # and back in last: the dict's order is the least recent first
            if endpoint is not None:
                self._endpoints[key] = endpoint
            else:
                endpoint = http1.Endpoint(
                    host=target.host,
                    port=target.port,
                    tls=None,  # never used: every connection comes from `send`'s own connect
                    host_header=target.host_header,
                    max_idle=MAX_IDLE_PER_ORIGIN,
                    idle_expiry=IDLE_EXPIRY_S,
                )
                if self._closed:
                    endpoint.close()  # this call's connection is closed when it ends, never kept
                else:
                    self._endpoints[key] = endpoint
            self._users[key] = self._users.get(key, 0) + 1
            return endpoint

    def _leave(self, key: tuple[str, int]) -> None:
        now = time.monotonic()
        with self._lock:
            self._users[key] -= 1
            if len(self._endpoints) > MAX_ORIGINS:
                self._forget_least_recent(len(self._endpoints) - MAX_ORIGINS)
            if now - self._pruned < _PRUNE_EVERY_S:
                return
            self._pruned = now
            # Connections idle past their expiry are closed, and an origin with none left and no exchange under
            # way is forgotten: a process that called many tenants' hosts keeps neither their sockets nor their
            # entries.
            for origin, endpoint in list(self._endpoints.items()):
                if not endpoint.prune() and not self._users.get(origin):
                    self._forget(origin)

    def _forget_least_recent(self, count: int) -> None:
        for origin, endpoint in list(self._endpoints.items()):
            if count <= 0:
                return
            if not self._users.get(origin):  # one in use is forgotten once its last exchange has left
                self._forget(origin)
                endpoint.close()
                count -= 1

    def _forget(self, origin: tuple[str, int]) -> None:
        del self._endpoints[origin]
        self._users.pop(origin, None)

    def close(self) -> None:
        """Closes the kept connections; a call still under way (it took this transport before a policy change) closes
        its connection when it ends."""
        with self._lock:
            self._closed = True
            endpoints, self._endpoints = list(self._endpoints.values()), {}
        for endpoint in endpoints:
            endpoint.close()
