"""Hardening found in review: the service's own addresses inside IPv6, a bounded DNS backlog, tenant patterns
with a time limit at render time."""

from __future__ import annotations

import os
import threading
import time

import pytest

from kagent.egress import EgressClient, EgressError, resolver
from kagent.models import EgressEvent
from tools.template_values import TemplateError
from tools.templating import render_request


def refused(client: EgressClient, url: str, timeout_ms: int = 2000) -> EgressError:
    with pytest.raises(EgressError) as info:
        client.request(
            project_id=None, purpose="http_tool", method="GET", url=url, headers={}, body=None, timeout_ms=timeout_ms
        )
    return info.value


@pytest.mark.django_db
def test_own_addresses_are_refused_inside_ipv6_too(client, egress_settings, upstream):
    egress_settings.KAGENT_OWN_HOSTS = [upstream.host]
    egress_settings.KAGENT_EGRESS_RESOLVE += (
        f" own-mapped.test:8443:[::ffff:{upstream.host}] own-6to4.test:8443:[2002:7f00:2::1]"
    )
    for host in ("tools.test", "own-mapped.test"):
        error = refused(client, f"https://{host}:8443/echo")
        assert error.code == "address_not_allowed" and "own hosts" in error.message, host
    assert upstream.received == []


@pytest.mark.django_db
def test_own_hosts_default_to_the_names_this_service_answers_to(settings):
    import subprocess
    import sys

    from tests.conftest import ROOT

    probe = "import django; django.setup(); from django.conf import settings as s; print(s.KAGENT_OWN_HOSTS)"
    env = {**os.environ, "ALLOWED_HOSTS": "kagent.example.com,.acme.test,*", "DEBUG": "true"}
    env.pop("KAGENT_OWN_HOSTS", None)
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "['kagent.example.com', 'acme.test']", out.stderr


@pytest.mark.django_db
def test_one_tenants_black_holed_dns_cannot_starve_another_tenant(egress_settings, upstream):
    # Issue #13, finding 8: lookups shared one pool per process (8 threads, 64 queued), so a tenant whose DNS never
    # answers filled it with lookups that getaddrinfo can't abandon, and every other tenant's calls in that process
    # timed out. Each project (and each host) now holds at most a few lookups at a time.
    release = threading.Event()

    def resolve(host: str, port: int) -> list[str]:
        if host.endswith(".blackhole.test"):
            release.wait(60)  # a resolver that never answers (until the test ends)
            raise OSError("no answer")
        return [upstream.host] if host == "other.test" else []

    egress_settings.KAGENT_EGRESS_RESOLVE = ""  # every name through the resolver above
    client = EgressClient(resolver=resolve, recorder=None)

    def call(project: str, host: str, timeout_ms: int) -> str:
        try:
            client.request(
                project_id=project,
                purpose="http_tool",
                method="GET",
                url=f"https://{host}:8443/echo",
                headers={},
                body=None,
                timeout_ms=timeout_ms,
            )
        except EgressError as exc:
            return exc.code
        return "ok"

    try:
        # Tenant A: 80 calls to black-holed names at once, then 80 more: far more than the old pool could hold.
        for wave in range(2):
            threads = [
                threading.Thread(target=call, args=("proj_a", f"h{wave}-{n}.blackhole.test", 300)) for n in range(80)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10)
        # Tenant B, in the same process while A's lookups still hang: answered in time.
        for _ in range(5):
            started = time.monotonic()
            assert call("proj_b", "other.test", 3000) == "ok"
            assert time.monotonic() - started < 2
        # A's next call is refused at once rather than queued behind its own hanging lookups.
        started = time.monotonic()
        assert call("proj_a", "h9.blackhole.test", 3000) == "timeout"
        assert time.monotonic() - started < 0.5
    finally:
        release.set()
        client.close()


@pytest.mark.django_db
def test_one_black_holed_host_cannot_take_every_lookup_of_a_tenant(egress_settings, upstream):
    release = threading.Event()

    def resolve(host: str, port: int) -> list[str]:
        if host == "stuck.test":
            release.wait(60)
            raise OSError("no answer")
        return [upstream.host]

    egress_settings.KAGENT_EGRESS_RESOLVE = ""
    client = EgressClient(resolver=resolve, recorder=None)
    try:
        for _ in range(resolver.DNS_PER_PROJECT + 2):
            assert refused(client, "https://stuck.test:8443/", timeout_ms=200).code == "timeout"
        # The same tenant (no project here) still reaches another host.
        response = client.request(
            project_id=None,
            purpose="http_tool",
            method="GET",
            url="https://other.test:8443/echo",
            headers={},
            body=None,
            timeout_ms=3000,
        )
        assert response.status == 200
    finally:
        release.set()
        client.close()


def test_a_catastrophic_pattern_is_bounded_at_render_time_too():
    tool = {
        "name": "lookup",
        "config": {
            "method": "GET",
            "url": "https://api.example.com/orders/{{args.order}}",
            "parameters": {
                "type": "object",
                "properties": {"order": {"type": "string", "pattern": "(a+)+b|d"}},
                "additionalProperties": False,
            },
        },
    }
    started = time.monotonic()
    try:
        render_request(
            tool=tool, arguments={"order": "a" * 40 + "!"}, end_user=None, variables={}, secret_lookup=lambda name: None
        )
    except TemplateError as exc:
        assert exc.code == "invalid_arguments"
    assert time.monotonic() - started < 2


@pytest.mark.django_db
def test_a_header_value_ending_in_a_line_feed_is_refused_before_connecting(client, base_url, upstream):
    # `$` matches before a final newline: the check must take the whole value, not leave it to h11 after the
    # connection and the TLS handshake.
    with pytest.raises(EgressError) as info:
        client.request(
            project_id=None,
            purpose="http_tool",
            method="GET",
            url=f"{base_url}/echo",
            headers={"X-A": "token\n"},
            body=None,
            timeout_ms=3000,
        )
    assert info.value.code == "invalid_request"
    assert upstream.sni_names == []  # nothing was sent, not even a handshake
    assert EgressEvent.objects.get().decision == "refused"
