"""`EgressClient.request`, the one call: checks the request, picks the pool of the policy in force, holds the
deadline over the whole exchange, refuses redirects and oversized bodies, and records every attempt. `get_client()`
is the process's client."""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings

from kagent.egress.addresses import EgressPolicy
from kagent.egress.decoding import BoundedDecoder
from kagent.egress.errors import REFUSAL_CODES, EgressError
from kagent.egress.headers import USER_AGENT, check_headers, joined_headers
from kagent.egress.limits import (
    ALLOWED_METHODS,
    MAX_REQUEST_BODY_BYTES,
    MAX_RESPONSE_BYTES,
    MAX_TIMEOUT_MS,
)
from kagent.egress.log import Recorder, record_in_log
from kagent.egress.resolver import Resolver, system_resolver
from kagent.egress.transport import EgressTransport, Exchange
from kagent.egress.urls import TargetUrl, url_check
from kagent.masking import mask_secrets

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EgressResponse:
    status: int
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    body: bytes  # decoded (gzip/deflate undone), at most 1 MiB
    resolved_address: str
    duration_ms: int


class EgressClient:
    """One per process (`get_client()`): holds the pool, so connections are reused between calls."""

    def __init__(self, *, resolver: Resolver | None = None, recorder: Recorder | None = record_in_log) -> None:
        self._resolver: Resolver = resolver or system_resolver
        self._recorder = recorder
        self._lock = threading.Lock()
        self._fingerprint: tuple[Any, ...] | None = None
        self._policy: EgressPolicy | None = None
        self._transport: EgressTransport | None = None

    def _policy_transport(self) -> tuple[EgressPolicy, EgressTransport]:
        """The connections for the egress settings in force now; new ones (and the old closed) when they change.
        Nothing else is kept between calls: no cookie, no credential, no redirect (a long-lived client shared by
        every tenant never carries one tenant's state to another)."""
        fingerprint = (
            repr(settings.KAGENT_EGRESS_ALLOW_NETWORKS),
            settings.KAGENT_EGRESS_CA_BUNDLE,
            settings.KAGENT_EGRESS_RESOLVE,
            repr(getattr(settings, "KAGENT_OWN_HOSTS", [])),
        )
        with self._lock:
            if fingerprint != self._fingerprint or self._transport is None or self._policy is None:
                policy = EgressPolicy.from_settings()
                transport = EgressTransport(policy=policy, resolver=self._resolver)
                old = self._transport
                self._transport, self._policy, self._fingerprint = transport, policy, fingerprint
                if old is not None:
                    old.close()
            return self._policy, self._transport

    def close(self) -> None:
        with self._lock:
            if self._transport is not None:
                self._transport.close()
            self._transport = self._policy = self._fingerprint = None

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
        record: Recorder | None = None,
        on_body: Callable[[bytes], None] | None = None,
    ) -> EgressResponse:
        """Make one call. Raises EgressError; records every attempt (with `record` instead of the client's recorder
        when given). `secret_values` are masked in the logged path. `on_body(piece)`: the answer's body, decoded, as
        it arrives (a streamed answer), within the same limits; the response still holds it whole."""
        recorder = record or self._recorder
        started = time.monotonic()
        host, port, path = "", None, ""
        outcome: dict[str, Any] = {"status": None, "bytes": 0, "address": ""}
        try:
            try:
                target = url_check(url)
            except EgressError:
                host, port, path = _log_target(url)
                raise
            host, port, path = target.host, target.port, target.path
            response = self._send(
                project_id=project_id,
                target=target,
                method=method,
                headers=headers,
                body=body,
                timeout_ms=timeout_ms,
                started=started,
                outcome=outcome,
                on_body=on_body,
            )
        except EgressError as exc:
            # The full reason (addresses, ranges) is for the operator: here and in the egress log. Tenants are shown
            # `tenant_message(exc)` only.
            logger.warning(
                "egress call not completed: project=%s purpose=%s host=%s port=%s code=%s address=%s reason=%s",
                project_id,
                purpose,
                host,
                port,
                exc.code,
                exc.resolved_address or outcome["address"],
                mask_secrets(exc.message, secret_values, replacement="****"),
            )
            self._record(
                recorder,
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
            recorder,
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
        recorder: Recorder | None,
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
        if recorder is None:
            return
        from kagent.models import EgressEvent  # the client is imported before the apps are ready

        decision = "refused" if code in REFUSAL_CODES else "allowed"
        recorder(
            EgressEvent(
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
        project_id: str | None,
        target: TargetUrl,
        method: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout_ms: int,
        started: float,
        outcome: dict[str, Any],
        on_body: Callable[[bytes], None] | None = None,
    ) -> EgressResponse:
        if not isinstance(method, str) or method.upper() not in ALLOWED_METHODS:
            raise EgressError("invalid_request", "the method is not allowed")
        method = method.upper()
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms <= 0:
            raise EgressError("invalid_request", "timeout_ms must be a positive integer")
        if body is not None and (not isinstance(body, bytes) or len(body) > MAX_REQUEST_BODY_BYTES):
            raise EgressError("invalid_request", "the request body must be bytes, at most 1 MiB")
        header_list = check_headers(headers)
        policy, transport = self._policy_transport()
        _refuse_own_host(policy, target)
        deadline = started + min(timeout_ms, MAX_TIMEOUT_MS) / 1000
        exchange = Exchange(policy=policy, deadline=deadline, project_id=project_id or "")
        given = {name.lower() for name, _ in header_list}
        request_headers = [
            *((name, value) for name, value in _DEFAULT_HEADERS if name.lower() not in given),
            *header_list,
            ("Accept-Encoding", "gzip, deflate"),
        ]
        heads: list[tuple[dict[str, str], BoundedDecoder]] = []  # the answer's headers, read once, and its decoder

        def on_head(status: int, answer_headers: list[tuple[str, str]]) -> None:
            """Before the body is read: a redirect or a declared size over the limit is refused."""
            outcome["status"] = status
            fields = joined_headers(answer_headers)
            if 300 <= status < 400:
                raise EgressError("redirect_not_followed", "the upstream answered with a redirect", status=status)
            declared = (fields.get("content-length") or "").strip()
            # isascii too: the head is read as latin-1, where "\xb2" (superscript two) is a digit to isdigit and not
            # to int; and never int() of thousands of digits (a ValueError past 4300). Anything that is not one plain
            # number is left to kagent.http1, which refuses it as bad framing.
            if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > MAX_RESPONSE_BYTES):
                raise EgressError("response_too_large", "the response is over 1 MiB", status=status)
            heads.append((fields, BoundedDecoder(fields.get("content-encoding", ""), MAX_RESPONSE_BYTES)))

        decoded_pieces: list[bytes] = []

        def on_raw(piece: bytes) -> None:
            """A streamed answer: each piece decoded as it arrives (the decoder stops one inflating past the limit)."""
            for decoded_piece in heads[-1][1].feed(piece):
                decoded_pieces.append(decoded_piece)
                if decoded_piece and on_body is not None:
                    on_body(decoded_piece)

        try:
            answer = transport.send(
                exchange, method, target, request_headers, body, on_head, on_raw if on_body is not None else None
            )
            outcome["address"] = exchange.peer
            outcome["bytes"] = len(answer.body)
            fields, decoder = heads[-1]
            if on_body is None:
                decoded = b"".join([*decoder.feed(answer.body), *decoder.flush()])
            else:
                for decoded_piece in decoder.flush():
                    decoded_pieces.append(decoded_piece)
                    if decoded_piece:
                        on_body(decoded_piece)
                decoded = b"".join(decoded_pieces)
        except EgressError as exc:
            outcome["bytes"] = outcome["bytes"] or exchange.received
            exc.status = exc.status or outcome["status"]
            exc.may_have_reached_upstream = exc.may_have_reached_upstream or exchange.sent
            exc.resolved_address = exc.resolved_address or exchange.peer
            raise
        return EgressResponse(
            status=answer.status,
            headers=fields,
            body=decoded,
            resolved_address=exchange.peer,
            duration_ms=int((time.monotonic() - started) * 1000),
        )


_DEFAULT_HEADERS = (("User-Agent", USER_AGENT), ("Accept", "*/*"))  # unless the call sets its own


def _refuse_own_host(policy: EgressPolicy, target: TargetUrl) -> None:
    if policy.is_own_host(target.host):
        raise EgressError("url_not_allowed", "K-Agent's own hosts are not reachable")


def destination_check(url: str) -> TargetUrl:
    """What the client refuses of a URL before any network access, for a URL a tenant saves to be called later (a
    webhook endpoint, an API knowledge source): `url_check`, then, under this moment's settings, a host that is one of
    K-Agent's own (KAGENT_OWN_HOSTS) and an address literal the deny list refuses. Raises EgressError
    (`url_not_allowed`, `address_not_allowed`). A name is not resolved here: the call checks its addresses when it
    connects."""
    target = url_check(url)
    policy = EgressPolicy.from_settings()
    _refuse_own_host(policy, target)
    try:
        literal = ipaddress.ip_address(target.host)
    except ValueError:
        return target
    if policy.denial(literal) is not None:
        raise EgressError("address_not_allowed", "the address is private, internal, reserved or K-Agent's own")
    return target


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
