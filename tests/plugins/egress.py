"""Fixtures for the outbound client (a plugin registered in tests/conftest.py, shared with the run tests): real HTTPS
servers on loopback with `trustme` certificates.

- `upstream`: the tenant's API, on 127.0.0.2:8443 (or the next free loopback address), reached as https://tools.test:8443
  through KAGENT_EGRESS_RESOLVE; it verifies every request's Standard Webhooks signature and records it.
- `internal`: a sentinel on 127.0.0.1:8443 standing for everything internal; no test may ever make it receive a byte
  of HTTP.
"""

from __future__ import annotations

import base64
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.upstream import Upstream, bind_upstream, server_context, write_certs

# Two tool signing secrets, as during a rotation: newest first.
SIGNING_SECRET_NEW = "whsec_" + base64.b64encode(b"k-agent test signing secret new!").decode()
SIGNING_SECRET_OLD = "whsec_" + base64.b64encode(b"k-agent test signing secret old!").decode()

CERT_NAMES = (
    "tools.test",
    "other.test",
    "rebind.test",
    "wire.test",  # tests/kagent/egress/test_wire.py: a raw server of its own
    "sdk.test",  # tests/tools/test_mcp_sdk.py: an MCP server of the official SDK
    "internal.test",
    "xn--bcher-kva.test",  # bücher.test: an internationalised name, in its ASCII (punycode) form
    "localhost",
    "127.0.0.1",
    "127.0.0.2",
    "127.0.0.3",
    "127.0.0.4",
    "127.0.0.5",
)


@pytest.fixture(scope="session")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("egress-certs")
    write_certs(directory, *CERT_NAMES)
    return directory


@pytest.fixture(scope="session")
def ca_file(cert_dir: Path) -> Path:
    return cert_dir / "ca.pem"


@pytest.fixture(scope="session")
def _upstream_server(cert_dir: Path) -> Iterator[Upstream]:
    server = bind_upstream(ssl_context=server_context(cert_dir), secrets=[SIGNING_SECRET_NEW, SIGNING_SECRET_OLD])
    yield server
    server.stop()


# The unguarded control's request to the sentinel (tests/kagent/egress/test_client.py): to its address, with a TLS
# name and a path no guarded call uses, so that leaving them out of the sentinel's check hides no guarded call (the
# corpus calls https://localhost:8443/ guarded), and no lookup of "localhost" (::1 first or alone on some hosts).
CONTROL_NAME, CONTROL_PATH = "unguarded-control.invalid", "/echo/unguarded-control"


@pytest.fixture(scope="session")
def _internal_server(cert_dir: Path) -> Iterator[Upstream | None]:
    # Another test run on this machine (a colleague's full suite) may hold 127.0.0.1:8443 for a while: wait for it.
    # If it never frees, the refusals are still checked by their codes; only the extra wire-level check is lost.
    deadline = time.monotonic() + 30
    while True:
        try:
            server = Upstream(host="127.0.0.1", port=8443, ssl_context=server_context(cert_dir)).start()
            break
        except OSError:
            if time.monotonic() > deadline:
                warnings.warn("127.0.0.1:8443 is busy: the internal sentinel is not observing", stacklevel=1)
                yield None
                return
            time.sleep(0.5)
    yield server
    server.stop()


@pytest.fixture
def upstream(_upstream_server: Upstream) -> Iterator[Upstream]:
    _upstream_server.reset()
    # A run test verifies with its project's signing secrets (tests/runs/test_http_tools.py): back to the rotation.
    _upstream_server.secrets = [SIGNING_SECRET_NEW, SIGNING_SECRET_OLD]
    yield _upstream_server
    _upstream_server.reset()


@pytest.fixture
def internal(_internal_server: Upstream | None) -> Iterator[Upstream | None]:
    """The internal sentinel; after the test it must not have received anything."""
    if _internal_server is None:
        yield None
        return
    _internal_server.reset()
    yield _internal_server
    # Less the unguarded control's (tests/kagent/egress/test_client.py), which the other test process of a parallel
    # run sends here when this one holds the address.
    received = [r.path for r in _internal_server.received if r.path != CONTROL_PATH]
    handshakes = [name for name in _internal_server.sni_names if name != CONTROL_NAME]
    assert received == [], "an internal address received a request"
    assert handshakes == [], "an internal address saw a TLS handshake"


@pytest.fixture
def egress_settings(settings: Any, upstream: Upstream, internal: Upstream, ca_file: Path) -> Any:
    """The test-only egress settings of SPEC §2: exactly the upstream's address is exempt from the deny list."""
    settings.KAGENT_EGRESS_ALLOW_NETWORKS = [f"{upstream.host}/32"]
    settings.KAGENT_EGRESS_CA_BUNDLE = str(ca_file)
    settings.KAGENT_EGRESS_RESOLVE = " ".join(
        [
            f"tools.test:8443:{upstream.host}",
            f"tools.test:443:{upstream.host}",
            f"xn--bcher-kva.test:8443:{upstream.host}",
            f"other.test:8443:{upstream.host}",
            f"wrongcert.test:8443:{upstream.host}",
            "internal.test:8443:127.0.0.1",
            "private.test:8443:10.0.0.5",
            "meta.test:443:169.254.169.254",
            "mixed.test:8443:93.184.216.34,127.0.0.1",
            f"mixed-allowed.test:8443:{upstream.host},10.1.2.3",
            "mixed6.test:8443:[2606:4700::1111],[::1]",
            "mapped.test:8443:[::ffff:127.0.0.1]",
            "nat64.test:8443:[64:ff9b::a9fe:a9fe]",
            "sixtofour.test:8443:[2002:c0a8:101::1]",
            "cgnat.test:8443:100.64.1.1",
            "bench.test:8443:198.18.0.10",
        ]
    )
    settings.KAGENT_OWN_HOSTS = ["kagent.test", "203.0.113.7"]
    return settings


@pytest.fixture
def base_url(egress_settings: Any) -> str:
    return "https://tools.test:8443"
