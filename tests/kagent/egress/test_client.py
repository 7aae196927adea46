"""The hardened outbound client against real TLS servers on loopback."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from fakes.upstream import Upstream
from kagent import egress
from kagent.egress import EgressClient, EgressError, get_client, transport
from kagent.egress import client as egress_client
from kagent.models import EgressEvent
from tests.plugins.egress import CONTROL_NAME, CONTROL_PATH

pytestmark = pytest.mark.django_db


def call(client: EgressClient, url: str, **kwargs: Any) -> egress.EgressResponse:
    params: dict[str, Any] = {
        "project_id": None,
        "purpose": "http_tool",
        "method": "GET",
        "url": url,
        "headers": {},
        "body": None,
        "timeout_ms": 5000,
    }
    params.update(kwargs)
    return client.request(**params)


def refused(client: EgressClient, url: str, **kwargs: Any) -> EgressError:
    with pytest.raises(EgressError) as info:
        call(client, url, **kwargs)
    return info.value


def test_call_reaches_the_checked_address_with_the_hostname_kept(client, base_url, upstream: Upstream):
    response = call(client, f"{base_url}/echo/orders/8812?lang=ar", headers={"X-Trace": "abc"})
    assert response.status == 200
    assert response.resolved_address == upstream.host
    echoed = json.loads(response.body)
    assert echoed["path"] == "/echo/orders/8812?lang=ar"
    assert echoed["headers"]["host"] == "tools.test:8443"  # Host keeps the name
    assert echoed["headers"]["user-agent"] == "K-Agent/1"
    assert echoed["headers"]["x-trace"] == "abc"
    assert upstream.sni_names == ["tools.test"]  # SNI keeps the name (and the certificate was checked for it)
    assert upstream.received[0].peer == "127.0.0.1" or upstream.received[0].peer.startswith("127.")


def test_an_internationalised_name_goes_out_in_its_ascii_form(client, egress_settings, upstream: Upstream):
    # Issue #13, finding 7: xn--bcher-kva.test (bücher.test) was refused as "ambiguous" at call time because httpx's
    # decoded `host` was compared with the ASCII form the URL check read.
    assert egress.url_check("https://xn--bcher-kva.test:8443/a").host == "xn--bcher-kva.test"
    assert egress.url_check("https://XN--BCHER-KVA.test:8443/a").host == "xn--bcher-kva.test"
    response = call(client, "https://xn--bcher-kva.test:8443/echo/idn")
    assert response.status == 200
    assert json.loads(response.body)["headers"]["host"] == "xn--bcher-kva.test:8443"
    assert upstream.sni_names == ["xn--bcher-kva.test"]
    # The Unicode spelling stays refused before anything else: only ASCII is read.
    assert refused(client, "https://bücher.test:8443/echo").code == "url_not_allowed"


def test_port_443_is_reachable_and_omitted_from_host(client, egress_settings, upstream):
    # Nothing listens on 443 here: the call is allowed, then fails to connect.
    error = refused(client, "https://tools.test/echo")
    assert error.code == "connect_failed"
    assert error.may_have_reached_upstream is False
    assert error.resolved_address == upstream.host


def test_every_call_and_refusal_is_recorded_without_query_or_secrets(client, base_url, upstream):
    call(client, f"{base_url}/echo/customers/cus_1?token=SECRET-IN-QUERY", headers={"Authorization": "Bearer S3CR3T"})
    refused(client, "https://127.0.0.1:8443/admin?x=1")
    refused(client, "https://user:hunter2@tools.test:8443/echo")
    events = list(EgressEvent.objects.order_by("id"))
    assert [e.decision for e in events] == ["allowed", "refused", "refused"]
    ok, internal_refusal, userinfo = events
    assert (ok.host, ok.port, ok.path, ok.status, ok.code) == ("tools.test", 8443, "/echo/customers/cus_1", 200, "")
    assert ok.resolved_address == upstream.host and ok.bytes_received > 0 and ok.purpose == "http_tool"
    assert (internal_refusal.host, internal_refusal.code, internal_refusal.resolved_address) == (
        "127.0.0.1",
        "address_not_allowed",
        "127.0.0.1",
    )
    assert userinfo.code == "url_not_allowed" and userinfo.host == "tools.test"
    for event in events:
        stored = json.dumps([getattr(event, f.name) for f in EgressEvent._meta.fields], default=str)
        for secret in ("SECRET-IN-QUERY", "S3CR3T", "hunter2", "token="):
            assert secret not in stored


def test_secret_values_in_the_path_are_masked_in_the_log(client, base_url):
    call(client, f"{base_url}/echo/keys/tok_live_abcdef", secret_values=["tok_live_abcdef"])
    assert EgressEvent.objects.get().path == "/echo/keys/****"


def test_connections_are_reused(client, base_url, upstream):
    for _ in range(3):
        assert call(client, f"{base_url}/echo/x").status == 200
    assert len({r.peer_port for r in upstream.received}) == 1
    assert len(upstream.sni_names) == 1  # one handshake for three calls


def test_get_client_is_one_per_process():
    assert get_client() is get_client()


def test_environment_proxies_are_ignored(client, base_url, upstream, monkeypatch):
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9/")
    assert call(client, f"{base_url}/echo/proxy").status == 200
    assert upstream.received[-1].path == "/echo/proxy"


def test_cookies_never_travel_between_calls(client, base_url, upstream):
    call(client, f"{base_url}/set-cookie")
    call(client, f"{base_url}/echo/after")
    assert "cookie" not in upstream.received[-1].headers


def test_body_and_methods(client, base_url, upstream):
    body = json.dumps({"note": "مرحبا"}).encode()
    headers = {"Content-Type": "application/json"}
    response = call(client, f"{base_url}/echo/p", method="post", body=body, headers=headers)
    assert json.loads(response.body)["method"] == "POST"
    assert upstream.received[-1].body == body
    assert refused(client, f"{base_url}/echo", method="TRACE").code == "invalid_request"
    assert refused(client, f"{base_url}/echo", method="CONNECT").code == "invalid_request"


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "internal.test"},
        {"host": "x"},
        {"Transfer-Encoding": "chunked"},
        {"Content-Length": "5"},
        {"Connection": "close"},
        {"Proxy-Authorization": "x"},
        {"X-Forwarded-For": "127.0.0.1"},
        {"Forwarded": "x"},
        {"X-Real-IP": "1.2.3.4"},
        {"Accept-Encoding": "br"},
    ],
)
def test_headers_that_could_redirect_or_smuggle_are_refused(client, base_url, upstream, headers):
    assert refused(client, f"{base_url}/echo", headers=headers).code == "header_not_allowed"
    assert upstream.received == []


@pytest.mark.parametrize(
    "headers", [{"X-A": "a\r\nHost: internal.test"}, {"X-A": "a\nb"}, {"X-A": "\x00"}, {"Bad Name": "x"}, {"": "x"}]
)
def test_header_injection_is_refused(client, base_url, upstream, headers):
    assert refused(client, f"{base_url}/echo", headers=headers).code == "invalid_request"
    assert upstream.received == []


def test_statuses_are_returned_for_the_caller_to_judge(client, base_url):
    assert call(client, f"{base_url}/status/404").status == 404
    assert call(client, f"{base_url}/status/429").status == 429
    assert call(client, f"{base_url}/status/500").status == 500


@pytest.mark.parametrize("path", ["/gzip-ok", "/deflate-zlib", "/deflate-raw"])
def test_compressed_bodies_are_decoded(client, base_url, path):
    body = json.loads(call(client, f"{base_url}{path}").body)
    assert body["data"]["status"] in {"packed", "zlib", "raw"}


def test_unknown_content_encoding_is_a_bad_response(client, base_url):
    error = refused(client, f"{base_url}/brotli")
    assert error.code == "bad_response" and error.may_have_reached_upstream


def test_exactly_one_mib_is_allowed(client, base_url):
    assert len(call(client, f"{base_url}/exact-limit").body) == egress.MAX_RESPONSE_BYTES


def test_redirects_are_not_followed(client, base_url, upstream, internal):
    error = refused(client, f"{base_url}/redirect?to=https://127.0.0.1:8443/secret")
    assert (error.code, error.status) == ("redirect_not_followed", 302)
    assert [r.path for r in upstream.received] == ["/redirect?to=https://127.0.0.1:8443/secret"]


def test_the_deadline_covers_a_trickling_body(client, base_url):
    started = time.monotonic()
    error = refused(client, f"{base_url}/trickle-body", timeout_ms=1000)
    elapsed = time.monotonic() - started
    assert error.code == "timeout" and error.may_have_reached_upstream
    assert 0.9 <= elapsed < 1.6


def test_the_deadline_covers_trickling_headers(client, base_url):
    started = time.monotonic()
    error = refused(client, f"{base_url}/trickle-headers", timeout_ms=800)
    assert error.code == "timeout"
    assert time.monotonic() - started < 1.4


def test_timeout_is_capped_at_15_seconds(client, base_url, monkeypatch):
    # The cap is a module constant; lowering it shows that a larger timeout_ms is cut to it (15 s is too slow to wait).
    monkeypatch.setattr(egress_client, "MAX_TIMEOUT_MS", 700)
    started = time.monotonic()
    assert refused(client, f"{base_url}/trickle-body", timeout_ms=600_000).code == "timeout"
    assert time.monotonic() - started < 1.3


@pytest.mark.parametrize("timeout_ms", [0, -1, True, 1.5, "1000", None])
def test_timeout_must_be_a_positive_integer(client, base_url, timeout_ms, upstream):
    assert refused(client, f"{base_url}/echo", timeout_ms=timeout_ms).code == "invalid_request"
    assert upstream.received == []


def test_certificate_for_another_name_fails_tls(client, egress_settings, upstream):
    error = refused(client, "https://wrongcert.test:8443/echo")
    assert error.code == "tls_failed" and not error.may_have_reached_upstream
    assert upstream.received == []


def test_untrusted_ca_fails_tls(client, egress_settings, upstream):
    egress_settings.KAGENT_EGRESS_CA_BUNDLE = ""
    assert refused(client, "https://tools.test:8443/echo").code == "tls_failed"
    assert upstream.received == []


def test_unknown_name_is_dns_failed(client, egress_settings):
    assert refused(client, "https://does-not-exist.invalid/x").code == "dns_failed"


def test_resolve_entries_apply_to_their_port_only(client, egress_settings):
    # other.test is only given for 8443; on 443 it goes to the real resolver, which does not know it.
    assert refused(client, "https://other.test/x").code == "dns_failed"


def test_a_pooled_connection_never_serves_a_different_policy(client, base_url, upstream, egress_settings):
    assert call(client, f"{base_url}/echo/1").status == 200
    egress_settings.KAGENT_EGRESS_ALLOW_NETWORKS = []  # the same address is now denied
    error = refused(client, f"{base_url}/echo/2")
    assert (error.code, error.resolved_address) == ("address_not_allowed", upstream.host)
    assert [r.path for r in upstream.received] == ["/echo/1"]


def test_a_connection_from_another_policy_is_rechecked_before_writing(egress_settings, base_url, upstream):
    # Defence in depth below the per-policy pools: a connection opened and kept under a policy that allowed its
    # address refuses to carry a request of an exchange whose policy denies that address.
    allowed = egress.EgressPolicy.from_settings()
    egress_settings.KAGENT_EGRESS_ALLOW_NETWORKS = []
    denied = egress.EgressPolicy.from_settings()
    connections = transport.EgressTransport(policy=allowed, resolver=egress.system_resolver)

    def send(policy: egress.EgressPolicy, path: str) -> int:
        exchange = transport.Exchange(policy=policy, deadline=time.monotonic() + 5)
        target = egress.url_check(f"{base_url}{path}")
        return connections.send(exchange, "GET", target, [], None, lambda status, headers: None).status

    try:
        assert send(allowed, "/echo/1") == 200  # the connection is kept
        with pytest.raises(EgressError) as info:
            send(denied, "/echo/2")
        assert (info.value.code, info.value.may_have_reached_upstream) == ("address_not_allowed", False)
        assert [r.path for r in upstream.received] == ["/echo/1"]
    finally:
        connections.close()


class RebindingResolver:
    """Fault injection: a DNS server that answers the allowed address first and an internal one afterwards."""

    def __init__(self, first: str, then: str) -> None:
        self.answers = [first, then]
        self.calls: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return [self.answers[min(len(self.calls) - 1, 1)]]


def test_dns_rebinding_cannot_reach_the_second_answer(egress_settings, upstream, internal):
    resolver = RebindingResolver(upstream.host, "127.0.0.1")
    rebinding = EgressClient(resolver=resolver)
    try:
        # Resolved once, checked, connected to that very address; the second answer is never looked up for it.
        for path in ("/echo/a", "/echo/b"):
            response = call(rebinding, f"https://rebind.test:8443{path}")
            assert response.resolved_address == upstream.host
        assert resolver.calls == [("rebind.test", 8443)]
        rebinding.close()  # a new connection resolves again: this time the answer is internal and refused
        error = refused(rebinding, "https://rebind.test:8443/echo/c")
        assert (error.code, error.resolved_address) == ("address_not_allowed", "127.0.0.1")
        assert len(resolver.calls) == 2
        assert [r.path for r in upstream.received] == ["/echo/a", "/echo/b"]
    finally:
        rebinding.close()


def test_resolver_answering_nothing_is_dns_failed(egress_settings):
    empty = EgressClient(resolver=lambda host, port: [])
    try:
        assert refused(empty, "https://empty.test:8443/").code == "dns_failed"
    finally:
        empty.close()


def test_resolver_answering_garbage_is_dns_failed(egress_settings):
    garbage = EgressClient(resolver=lambda host, port: ["not-an-ip"])
    try:
        assert refused(garbage, "https://garbage.test:8443/").code == "dns_failed"
    finally:
        garbage.close()


def test_slow_dns_is_bounded_by_the_deadline(egress_settings):
    def slow(host: str, port: int) -> list[str]:
        time.sleep(2)
        return ["93.184.216.34"]

    client = EgressClient(resolver=slow)
    started = time.monotonic()
    try:
        assert refused(client, "https://slow.test:8443/", timeout_ms=500).code == "timeout"
    finally:
        client.close()
    assert time.monotonic() - started < 1.0


def test_misconfigured_settings_fail_closed(client, egress_settings):
    egress_settings.KAGENT_EGRESS_ALLOW_NETWORKS = ["not-a-cidr"]
    assert refused(client, "https://tools.test:8443/echo").code == "egress_misconfigured"


def test_allow_networks_exempt_only_what_they_name(client, egress_settings, upstream, internal):
    # 127.0.0.2/32 is exempt; its neighbours in 127/8 are not.
    assert call(client, "https://tools.test:8443/echo").status == 200
    assert refused(client, "https://127.0.0.1:8443/").code == "address_not_allowed"
    neighbour = "127.0.0.9" if upstream.host != "127.0.0.9" else "127.0.0.8"
    assert refused(client, f"https://{neighbour}:8443/").code == "address_not_allowed"
    assert refused(client, "https://mixed-allowed.test:8443/").code == "address_not_allowed"


def test_plain_httpx_would_have_reached_the_internal_sentinel(internal):
    """Control for the corpus: the sentinel is real and reachable when nothing guards the call."""
    # verify=False: this is the unguarded control, and it must work even if another test run owns the port. By the
    # TLS name and path the sentinel's own check leaves out: another test process's sentinel may be the one it reaches.
    with httpx.Client(verify=False, trust_env=False) as plain:  # noqa: S501
        answer = plain.get(f"https://127.0.0.1:8443{CONTROL_PATH}", extensions={"sni_hostname": CONTROL_NAME})
        assert answer.status_code == 200
    if internal is not None:  # None only while another test run holds 127.0.0.1:8443 (see tests/plugins/egress.py)
        assert [r.path for r in internal.received] == [CONTROL_PATH]
        assert internal.sni_names == [CONTROL_NAME]
        internal.reset()  # the fixture's own check is for guarded calls
