"""A request on a kept database connection (CONN_MAX_AGE, CONN_HEALTH_CHECKS): the API key lookup, every API
request's first statement, stands in for Django's health check (`SELECT 1` before the first statement of each
request), so the check costs no round trip of its own — and a connection broken meanwhile still doesn't fail the
request."""

from __future__ import annotations

import psycopg
import pytest
from django.db import close_old_connections, connection, connections
from django.test import Client

from tests.conftest import database_url_for_subprocess, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def _list(tenant) -> int:
    """One API request as a server makes it. (Django's test client leaves out what a server does between requests:
    `close_old_connections`, which closes an old connection and asks for the health check of a kept one.)"""
    close_old_connections()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {tenant.secret_key}")
    return client.get("/v1/agents").status_code


def test_the_key_lookup_is_the_health_check(monkeypatch):
    tenant = make_tenant("alice")
    assert _list(tenant) == 200  # the connection is kept after this request
    checks: list[bool] = []
    wrapper = type(connections["default"])
    usable = wrapper.is_usable
    monkeypatch.setattr(wrapper, "is_usable", lambda self: checks.append(True) or usable(self))
    assert _list(tenant) == 200
    assert checks == []  # no SELECT 1 before the request's statements


def test_a_connection_broken_between_requests_does_not_fail_the_next_one():
    tenant = make_tenant("alice")
    assert _list(tenant) == 200
    kept = connection.connection
    assert kept is not None
    pid = kept.info.backend_pid
    with psycopg.connect(database_url_for_subprocess(), autocommit=True) as admin:  # as a database restart would
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    assert _list(tenant) == 200
    assert connection.connection is not None and connection.connection.info.backend_pid != pid
