"""The SSRF corpus: hostile URLs and hostile servers, each refused with the right code.

Every case goes through the real client with the real test settings (127.0.0.2 exempt, everything else denied) and
the internal sentinel on 127.0.0.1:8443 listening: the `internal` fixture fails the test if it ever receives a
handshake or a request. Names resolve through KAGENT_EGRESS_RESOLVE (which replaces DNS only: the deny list still
applies) or the real system resolver (`localhost`).
"""

from __future__ import annotations

import ipaddress

import pytest

from kagent import egress
from kagent.egress import EgressClient, EgressError
from kagent.models import EgressEvent

pytestmark = pytest.mark.django_db

URL = "url_not_allowed"
ADDRESS = "address_not_allowed"

CORPUS: list[tuple[str, str]] = [
    # Schemes
    ("http://tools.test:8443/echo", URL),
    ("ftp://tools.test:8443/echo", URL),
    ("file:///etc/passwd", URL),
    ("gopher://127.0.0.1:8443/_GET", URL),
    ("//tools.test:8443/echo", URL),
    ("https:/tools.test:8443/echo", URL),
    # Alternate IPv4 spellings: decimal, hex, octal, short, zero-padded
    ("https://2130706433:8443/", URL),
    ("https://0x7f000001:8443/", URL),
    ("https://0x7f.0.0.1:8443/", URL),
    ("https://0x7F.0x0.0x0.0x1:8443/", URL),
    ("https://0177.0.0.1:8443/", URL),
    ("https://017700000001:8443/", URL),
    ("https://127.1:8443/", URL),
    ("https://127.0.1:8443/", URL),
    ("https://127.000.000.001:8443/", URL),
    ("https://0127.0.0.1:8443/", URL),
    ("https://00000127.0.0.1:8443/", URL),
    ("https://169.254.43518:8443/", URL),
    ("https://0:8443/", URL),
    ("https://1.2.3.4.5:8443/", URL),
    ("https://256.0.0.1:8443/", URL),
    ("https://127.0.0.1.:8443/", URL),
    ("https://tools.test.:8443/echo", URL),
    # Userinfo and backslash tricks
    ("https://user@tools.test:8443/echo", URL),
    ("https://user:pass@tools.test:8443/echo", URL),
    ("https://tools.test:8443@127.0.0.1:8443/", URL),
    ("https://tools.test@127.0.0.1:8443/", URL),
    ("https://evil.com\\@127.0.0.1:8443/", URL),
    ("https://tools.test:8443\\@127.0.0.1:8443/", URL),
    ("https://127.0.0.1:8443\\tools.test/", URL),
    ("https://tools.test%2f@127.0.0.1:8443/", URL),
    ("https://%31%32%37.0.0.1:8443/", URL),
    ("https://[::1]@tools.test:8443/", URL),
    # Unicode dots and digits (IDNA would fold them to ASCII)
    ("https://127。0。0。1:8443/", URL),
    ("https://127．0．0．1:8443/", URL),
    ("https://127｡0｡0｡1:8443/", URL),
    ("https://tools。test:8443/echo", URL),
    ("https://１２７.0.0.1:8443/", URL),
    ("https://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ:8443/", URL),
    # Ports
    ("https://tools.test:22/echo", URL),
    ("https://tools.test:80/echo", URL),
    ("https://tools.test:0443/echo", URL),
    ("https://tools.test:08443/echo", URL),
    ("https://tools.test:+443/echo", URL),
    ("https://tools.test:-443/echo", URL),
    ("https://tools.test:443 /echo", URL),
    ("https://tools.test:65979/echo", URL),  # 443 + 65536
    ("https://tools.test:74979/echo", URL),  # 8443 + 65536
    ("https://tools.test:99999/echo", URL),
    ("https://tools.test:/echo", URL),
    ("https://tools.test:0/echo", URL),
    ("https://tools.test:8443:8443/echo", URL),
    # Zone ids, whitespace, controls, paths
    ("https://[fe80::1%25eth0]:8443/", URL),
    ("https://[fe80::1%eth0]:8443/", URL),
    ("https://[::1%251]:8443/", URL),
    (" https://tools.test:8443/echo", URL),
    ("https://tools.test:8443/echo\r\nHost: internal.test", URL),
    ("https://tools.test:8443/ec ho", URL),
    ("https://tools.test:8443/a/../redirect", URL),
    ("https://tools.test:8443/a/%2e%2e/redirect", URL),
    ("https://tools.test:8443/a/%2E/x", URL),
    ("https://tools.test:8443/a/%252e%252e/x", URL),
    ("https://tools.test:8443/echo#frag", URL),
    # K-Agent's own hosts (a setting)
    ("https://kagent.test/", URL),
    ("https://api.kagent.test:8443/", URL),
    ("https://203.0.113.7/", ADDRESS),
    # IPv4 literals in denied ranges
    ("https://127.0.0.1:8443/", ADDRESS),
    ("https://127.255.255.254:8443/", ADDRESS),
    ("https://10.0.0.1/", ADDRESS),
    ("https://172.16.0.1/", ADDRESS),
    ("https://172.31.255.255/", ADDRESS),
    ("https://192.168.1.1/", ADDRESS),
    ("https://100.64.0.1/", ADDRESS),
    ("https://100.127.255.254/", ADDRESS),
    ("https://169.254.169.254/", ADDRESS),
    ("https://0.0.0.0:8443/", ADDRESS),
    ("https://0.1.2.3/", ADDRESS),
    ("https://224.0.0.1/", ADDRESS),
    ("https://239.255.255.250/", ADDRESS),
    ("https://240.0.0.1/", ADDRESS),
    ("https://255.255.255.255/", ADDRESS),
    ("https://198.18.0.1/", ADDRESS),
    ("https://198.19.255.255/", ADDRESS),
    # IPv6 literals: loopback, unspecified, ULA, link-local, site-local, multicast
    ("https://[::1]:8443/", ADDRESS),
    ("https://[::]:8443/", ADDRESS),
    ("https://[0:0:0:0:0:0:0:1]:8443/", ADDRESS),
    ("https://[fc00::1]/", ADDRESS),
    ("https://[fd00:ec2::254]/", ADDRESS),
    ("https://[fe80::1]/", ADDRESS),
    ("https://[febf::1]/", ADDRESS),
    ("https://[fec0::1]/", ADDRESS),
    ("https://[ff02::1]/", ADDRESS),
    # IPv4 embedded in IPv6: mapped, compatible, NAT64 (both prefixes), 6to4, Teredo
    ("https://[::ffff:127.0.0.1]:8443/", ADDRESS),
    ("https://[::ffff:7f00:1]:8443/", ADDRESS),
    ("https://[::ffff:169.254.169.254]/", ADDRESS),
    ("https://[::ffff:10.0.0.1]/", ADDRESS),
    ("https://[::127.0.0.1]:8443/", ADDRESS),
    ("https://[::a9fe:a9fe]/", ADDRESS),
    ("https://[64:ff9b::7f00:1]:8443/", ADDRESS),
    ("https://[64:ff9b::a9fe:a9fe]/", ADDRESS),
    ("https://[64:ff9b::192.168.0.1]/", ADDRESS),
    ("https://[64:ff9b:1::a9fe:a9fe]/", ADDRESS),
    ("https://[64:ff9b:1:fffe::1]/", ADDRESS),
    ("https://[2002:7f00:1::]:8443/", ADDRESS),
    ("https://[2002:a9fe:a9fe::1]/", ADDRESS),
    ("https://[2002:0a00:0001::1]/", ADDRESS),
    ("https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", ADDRESS),  # Teredo, client 127.0.0.1
    ("https://[2001:0:a00:1::1]/", ADDRESS),  # Teredo, server 10.0.0.1
    ("https://[2001:0:4136:e378:8000:63bf:5601:5601]/", ADDRESS),  # Teredo, client 169.254.169.254
    # Names that resolve to denied addresses (resolve entries replace DNS; the deny list still applies)
    ("https://private.test:8443/", ADDRESS),
    ("https://meta.test/latest/meta-data/", ADDRESS),
    ("https://internal.test:8443/", ADDRESS),
    ("https://mixed.test:8443/", ADDRESS),  # one public and one private answer
    ("https://mixed-allowed.test:8443/", ADDRESS),  # the exempt test address plus a private one
    ("https://mixed6.test:8443/", ADDRESS),
    ("https://mapped.test:8443/", ADDRESS),
    ("https://nat64.test:8443/", ADDRESS),
    ("https://sixtofour.test:8443/", ADDRESS),
    ("https://cgnat.test:8443/", ADDRESS),
    ("https://bench.test:8443/", ADDRESS),
    ("https://localhost:8443/", ADDRESS),  # the real system resolver: /etc/hosts says 127.0.0.1
    ("https://LOCALHOST:8443/", ADDRESS),
    # Names that resolve to nothing
    ("https://nothing.invalid/", "dns_failed"),
]


def test_the_corpus_is_big_enough():
    assert len(CORPUS) >= 60
    assert len({url for url, _ in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize(("url", "code"), CORPUS, ids=[f"{i:03d}" for i in range(len(CORPUS))])
def test_hostile_url_is_refused(client: EgressClient, egress_settings, upstream, url: str, code: str):
    with pytest.raises(EgressError) as info:
        client.request(
            project_id=None, purpose="http_tool", method="GET", url=url, headers={}, body=None, timeout_ms=3000
        )
    assert info.value.code == code, info.value.message
    assert info.value.may_have_reached_upstream is False
    assert upstream.received == []
    event = EgressEvent.objects.get()
    assert (event.decision, event.code) == ("refused", code)


@pytest.mark.parametrize(
    "target",
    [
        "https://127.0.0.1:8443/secret",
        "http://169.254.169.254/latest/meta-data/",
        "https://internal.test:8443/",
        "https://[::1]:8443/",
        "/relative/path",
    ],
)
def test_redirects_to_internal_addresses_are_not_followed(client, egress_settings, upstream, internal, target):
    with pytest.raises(EgressError) as info:
        client.request(
            project_id=None,
            purpose="http_tool",
            method="GET",
            url=f"https://tools.test:8443/redirect?to={target}",
            headers={},
            body=None,
            timeout_ms=3000,
        )
    assert (info.value.code, info.value.status) == ("redirect_not_followed", 302)
    assert len(upstream.received) == 1


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/big-cl", "response_too_large"),  # Content-Length over 1 MiB: refused before the body is read
        ("/big-chunked", "response_too_large"),  # no Content-Length: counted while streaming
        ("/gzip-bomb", "response_too_large"),  # 64 MiB of zeros in ~64 KiB: decoded bytes are counted
        ("/gzip-bomb-chunked", "response_too_large"),
        ("/trickle-body", "timeout"),
        ("/trickle-headers", "timeout"),
    ],
)
def test_hostile_servers_are_cut_off(client, egress_settings, upstream, path, code):
    with pytest.raises(EgressError) as info:
        client.request(
            project_id=None,
            purpose="http_tool",
            method="GET",
            url=f"https://tools.test:8443{path}",
            headers={},
            body=None,
            timeout_ms=1000,
        )
    assert info.value.code == code
    assert info.value.may_have_reached_upstream is True
    event = EgressEvent.objects.get()
    assert (event.decision, event.code) == ("allowed", code)
    assert event.bytes_received <= egress.MAX_RESPONSE_BYTES + 64 * 1024


def test_big_content_length_is_refused_before_reading(client, egress_settings, upstream):
    with pytest.raises(EgressError):
        client.request(
            project_id=None,
            purpose="http_tool",
            method="GET",
            url="https://tools.test:8443/big-cl",
            headers={},
            body=None,
            timeout_ms=3000,
        )
    assert EgressEvent.objects.get().bytes_received == 0


@pytest.mark.parametrize(
    ("path", "timeout_ms", "code", "received"),
    [
        # 100 bytes declared, one sent every 0.2 s: a second is enough for a few of them.
        ("/trickle-body", 1000, "timeout", range(1, 100)),
        # 2 MiB in 64 KiB chunks, no declared length: read until the next chunk would pass 1 MiB.
        ("/big-chunked", 3000, "response_too_large", [egress.MAX_RESPONSE_BYTES]),
    ],
)
def test_a_body_cut_off_is_logged_with_the_bytes_read(
    client, egress_settings, upstream, path, timeout_ms, code, received
):
    with pytest.raises(EgressError) as info:
        client.request(
            project_id=None,
            purpose="http_tool",
            method="GET",
            url=f"https://tools.test:8443{path}",
            headers={},
            body=None,
            timeout_ms=timeout_ms,
        )
    assert info.value.code == code
    assert EgressEvent.objects.get().bytes_received in received


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.1.1",
        "172.20.0.1",
        "192.168.0.10",
        "100.100.100.100",
        "169.254.0.1",
        "0.0.0.1",
        "224.1.1.1",
        "250.0.0.1",
        "255.255.255.255",
        "198.18.5.5",
        "::1",
        "::",
        "fd12::1",
        "fe80::abcd",
        "fec0::1",
        "ff0e::1",
        "::ffff:192.168.1.1",
        "::10.0.0.1",
        "64:ff9b::10.0.0.1",
        "64:ff9b:1::1.2.3.4",
        "2002:c0a8:0101::",
        "2001:0:a9fe:a9fe::",
        # Issue #13, finding 6: special-purpose ranges that are never a business's API.
        "192.0.0.1",  # IETF protocol assignments
        "192.0.0.170",
        "192.0.2.5",  # TEST-NET-1
        "198.51.100.7",  # TEST-NET-2
        "203.0.113.9",  # TEST-NET-3
        "192.88.99.1",  # 6to4 relay anycast (deprecated)
        "2001:db8::1",  # documentation
        "2001:db8:ffff::1",
        "3fff::1",  # documentation (RFC 9637)
        "100::1",  # discard-only
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo with public server and client: all of 2001::/32
        "2001:2::1",  # benchmarking, inside 2001::/23
        "5f00::1",  # SRv6 SIDs
        "::ffff:0:7f00:1",  # SIIT (IPv4-translated) form of 127.0.0.1
        "::ffff:0:808:808",  # SIIT form of a public address: never a public destination either
    ],
)
def test_denied_addresses(address: str):
    assert egress.address_denial(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "8.8.8.8",
        "1.1.1.1",
        "172.15.255.255",
        "172.32.0.1",
        "100.63.255.255",
        "100.128.0.1",
        "198.17.255.255",
        "198.20.0.1",
        "223.255.255.255",
        "2606:4700::1111",
        "2a00:1450:4001::200e",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
        "192.0.1.1",
        "192.0.3.1",
        "192.88.98.1",
        "198.51.99.1",
        "203.0.112.1",
        "2001:200::1",  # just past 2001::/23 (a real allocation)
        "2001:db9::1",
    ],
)
def test_public_addresses_pass(address: str):
    assert egress.address_denial(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    "entry",
    ["siit.test:8443:[::ffff:0:127.0.0.1]", "teredo.test:8443:[2001:0:4136:e378:8000:63bf:3fff:fdd2]"],
)
def test_siit_and_teredo_answers_are_refused_before_connecting(client, egress_settings, internal, entry):
    egress_settings.KAGENT_EGRESS_RESOLVE += f" {entry}"
    host = entry.split(":")[0]
    with pytest.raises(EgressError) as info:
        client.request(
            project_id=None,
            purpose="http_tool",
            method="GET",
            url=f"https://{host}:8443/",
            headers={},
            body=None,
            timeout_ms=2000,
        )
    assert info.value.code == ADDRESS
