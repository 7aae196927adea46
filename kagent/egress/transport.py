"""The connection layer: an httpx transport around an httpcore pool whose network backend resolves once, refuses
denied answers and connects to exactly a checked address; every socket operation gets only the time left of the
exchange; httpcore's errors become EgressErrors."""

from __future__ import annotations

import contextvars
import ipaddress
import socket
import ssl
import time
from collections.abc import Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Literal

import certifi
import httpcore
import httpx
from httpcore._backends.sync import SyncStream

from kagent.egress.addresses import EgressPolicy, IPAddress
from kagent.egress.errors import EgressError
from kagent.egress.limits import CONNECT_TIMEOUT_S
from kagent.egress.resolver import Resolver, dns_pool

# --- One exchange's state, seen by the network backend of the thread running it ---------------------------------


@dataclass
class Exchange:
    policy: EgressPolicy
    deadline: float  # time.monotonic()
    project_id: str = ""  # whose call: DNS lookups are admitted per project
    sent: bool = False
    peer: str = ""

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def clamp(self, timeout: float | None, exc: type[Exception]) -> float:
        left = self.remaining()
        if left <= 0:
            raise exc("the call's deadline has passed")
        return left if timeout is None else min(timeout, left)


EXCHANGE: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar("kagent_egress_exchange", default=None)


class _GuardedStream(httpcore.NetworkStream):
    """A connection to one checked address; every operation gets at most the time left of the current exchange."""

    def __init__(self, inner: httpcore.NetworkStream, address: str, policy: EgressPolicy) -> None:
        self._inner = inner
        self.address = address
        self.policy = policy

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        exchange = EXCHANGE.get()
        if exchange is not None:
            timeout = exchange.clamp(timeout, httpcore.ReadTimeout)
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        exchange = EXCHANGE.get()
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
        exchange = EXCHANGE.get()
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

    def _resolve(self, host: str, port: int, exchange: Exchange | None) -> list[str]:
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
        # A name whose DNS never answers must not starve anyone else's lookups (resolver.py): admitted per process,
        # per project and per host, or refused at once; never queued behind lookups that hang.
        project = exchange.project_id if exchange is not None else ""
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

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        exchange = EXCHANGE.get()
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
        exchange = EXCHANGE.get()
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
