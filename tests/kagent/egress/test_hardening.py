"""Hardening found in review: the service's own addresses inside IPv6, a bounded DNS backlog, tenant patterns
with a time limit at render time."""

from __future__ import annotations

import os
import threading
import time

import pytest

from kagent.egress import EgressClient, EgressError, resolver
from tools.templating import TemplateError, render_request


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
def test_a_resolver_that_never_answers_cannot_take_every_lookup(monkeypatch, egress_settings):
    release = threading.Event()

    def hanging(host: str, port: int) -> list[str]:
        release.wait(10)
        return ["93.184.216.34"]

    monkeypatch.setattr(resolver, "_dns_slot_counters", {os.getpid(): threading.BoundedSemaphore(1)})
    client = EgressClient(resolver=hanging)
    try:
        assert refused(client, "https://hang1.test:8443/", timeout_ms=300).code == "timeout"
        started = time.monotonic()
        error = refused(client, "https://hang2.test:8443/", timeout_ms=2000)
        assert error.code == "timeout" and "too many lookups" in error.message
        assert time.monotonic() - started < 0.5  # refused at once, not after waiting
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
