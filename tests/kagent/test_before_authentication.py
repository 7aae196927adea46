"""What a request costs before its API key is known (issue 27, finding 3): nothing reads its body, let alone parses
it, before the key is checked, for every operation of the OpenAPI document (once the answer is decided, a body up to
DATA_UPLOAD_MAX_MEMORY_SIZE is drained, unparsed, so the client reads the answer); the events server (ASGI) reads at
most that much of it; and requests with a key that isn't valid are limited per client address."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings
from django.test.client import FakePayload
from django.urls import resolve
from rest_framework.test import APIClient

from kagent import errors
from kagent.api import ProjectApi
from kagent.parsers import StrictJSONParser
from tests.conftest import ROOT, database_url_for_subprocess, wait_for
from tests.kagent.test_auth import error
from tests.runs.test_run_events_live import _free_port

pytestmark = pytest.mark.django_db

# Not JSON: parsed, each would be a 400 `invalid_json` (or, over DATA_UPLOAD_MAX_MEMORY_SIZE, 2.5 MB, a 413).
HUGE_MALFORMED = b'{"agent": "agt_x", "input": "' + b"x" * 2_700_000 + b"\\"
LARGE_MALFORMED = b'{"agent": "agt_x", "input": "' + b"x" * 2_000_000 + b"\\"


@pytest.fixture(autouse=True)
def fresh_counters(settings):
    # Counters of this test's own: a namespace no other test process (sharing the Redis database) writes to.
    settings.CACHES = {name: {**config, "KEY_PREFIX": uuid.uuid4().hex} for name, config in settings.CACHES.items()}


def wrong_key() -> str:
    return "ka_sk_" + secrets.token_urlsafe(32)  # the shape of a key (43 characters), of no project


@pytest.fixture
def body_reads(monkeypatch) -> list[str]:
    """Every read of a request's body, and every parse of one, as it happens: the test client's `wsgi.input` is a
    FakePayload, which everything that reads a body (`request.body`, `request.POST`, DRF's parsers) reads from.
    Reads once the answer is decided, to drain the socket (kagent.errors.drain_unread_body), are `drain`."""
    seen: list[str] = []
    draining = False
    read, readline, parse, drain = (
        FakePayload.read,
        FakePayload.readline,
        StrictJSONParser.parse,
        errors.drain_unread_body,
    )

    def spy_read(self: FakePayload, *args: Any, **kwargs: Any) -> bytes:
        seen.append("drain" if draining else "read")
        return read(self, *args, **kwargs)

    def spy_readline(self: FakePayload, *args: Any, **kwargs: Any) -> bytes:
        seen.append("drain" if draining else "readline")
        return readline(self, *args, **kwargs)

    def spy_parse(self: StrictJSONParser, *args: Any, **kwargs: Any) -> Any:
        seen.append("parse")
        return parse(self, *args, **kwargs)

    def spy_drain(request: Any) -> None:
        nonlocal draining
        draining = True
        try:
            drain(request)
        finally:
            draining = False

    monkeypatch.setattr(FakePayload, "read", spy_read)
    monkeypatch.setattr(FakePayload, "readline", spy_readline)
    monkeypatch.setattr(StrictJSONParser, "parse", spy_parse)
    monkeypatch.setattr(errors, "drain_unread_body", spy_drain)
    return seen


def send(client: APIClient, method: str, path: str, body: bytes, **extra: Any) -> Any:
    return client.generic(method, path, body, content_type="application/json", **extra)


def drained_only(reads: list[str], body: bytes) -> bool:
    """Nothing read before the answer was decided, nothing parsed; once it was, a body up to the upload limit read to
    its end (so the client reads the answer), a larger one not at all."""
    if len(body) > django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return reads == []
    return set(reads) == {"drain"}


def operations() -> list[tuple[str, str]]:
    """Every operation of the served OpenAPI document, its path filled with values its URL pattern accepts."""
    doc = json.loads(APIClient().get("/v1/openapi.json").content)
    found = []
    for template, item in doc["paths"].items():
        path = template
        for name in [part[1:-1] for part in template.split("/") if part.startswith("{")]:
            value = "1" if name in ("number", "other") else "x" if name == "name" else "abc_" + "0" * 26
            path = path.replace("{" + name + "}", value)
        for method in item:
            if method in ("get", "post", "put", "patch", "delete"):
                found.append((method.upper(), path))
    return found


def test_no_operation_reads_the_body_before_the_key_is_checked(alice, body_reads, settings):
    settings.KAGENT_AUTH_FAILURES = 10_000  # this test is about reading, not about the limit
    ops = operations()
    assert len(ops) > 40 and ("POST", "/v1/runs") in ops
    problems = []
    for method, path in ops:
        view = resolve(path).func.view_class  # type: ignore[attr-defined]
        if not issubclass(view, ProjectApi):
            problems.append(f"{method} {path}: {view.__name__} is not a ProjectApi")
            continue
        for label, header, status, code in (
            ("a wrong key", f"Bearer {wrong_key()}", 401, "invalid_api_key"),
            ("no key", None, 401, "authentication_required"),
            ("not a key", "Bearer nope", 401, "invalid_api_key"),
        ):
            for body in (HUGE_MALFORMED, LARGE_MALFORMED):
                body_reads.clear()
                extra = {"HTTP_AUTHORIZATION": header} if header else {}
                response = send(APIClient(), method, path, body, **extra)
                if (response.status_code, error(response)) != (status, code) or not drained_only(body_reads, body):
                    problems.append(f"{method} {path} with {label}: {response.status_code} {error(response)}")
        if not view.publishable_allowed:  # a visitor's key where only the business's server may go: 403, unread
            for body in (HUGE_MALFORMED, LARGE_MALFORMED):
                body_reads.clear()
                response = send(alice.client(alice.publishable_key), method, path, body)
                if response.status_code != 403 or not drained_only(body_reads, body):
                    problems.append(f"{method} {path} with a publishable key: {response.status_code} {body_reads}")
    assert not problems, "\n".join(problems)


def test_the_spies_see_a_body_that_is_read(alice, body_reads):
    # The right key: now the body is read, and refused for what it is (over DATA_UPLOAD_MAX_MEMORY_SIZE: 413,
    # under it: parsed, 400) — so the test above would have seen a read before the key was checked.
    assert len(HUGE_MALFORMED) > django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = send(alice.client(), "POST", "/v1/runs", HUGE_MALFORMED)
    assert response.status_code == 413 and error(response) == "request_too_large"
    small = b'{"agent": "agt_x", "input": "' + b"x" * 2_000_000 + b"\\"
    response = send(alice.client(), "POST", "/v1/runs", small)
    assert response.status_code == 400 and error(response) == "invalid_json"
    assert "read" in body_reads and "parse" in body_reads


@pytest.fixture
def gunicorn_server(tmp_path: Path) -> Iterator[str]:
    """`gunicorn kagent.wsgi` as production runs it (gunicorn.conf.py: threaded), on this session's database."""
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_subprocess(),
        "DEBUG": "false",
        "WEB_CONCURRENCY": "1",
        "KAGENT_BIND": f"127.0.0.1:{port}",
        "KAGENT_AUTH_FAILURES": "1000",  # its counters are no test's own: stay clear of the limit
    }
    with open(tmp_path / "gunicorn.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "kagent.wsgi", "-c", "gunicorn.conf.py"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"

        def answers() -> bool:
            if proc.poll() is not None:
                raise RuntimeError((tmp_path / "gunicorn.log").read_text())
            try:
                return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        try:
            wait_for(answers, timeout=60, message="gunicorn to answer")
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def test_a_client_sending_a_large_body_with_a_wrong_key_reads_the_401(gunicorn_server):
    # A client sends the whole body before it reads the answer. Unread, the body was left on the socket: gunicorn
    # drains 64 KB of it and closes, and the client saw the connection reset instead of the 401. Drained (up to
    # DATA_UPLOAD_MAX_MEMORY_SIZE, never parsed), the answer arrives, on a connection kept for the next request.
    assert len(LARGE_MALFORMED) < django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    headers = {"Content-Type": "application/json"}
    with httpx.Client(base_url=gunicorn_server, timeout=30) as client:
        for _ in range(5):
            response = client.post(
                "/v1/runs", content=LARGE_MALFORMED, headers=headers | {"Authorization": "Bearer nope"}
            )
            assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"
            response = client.post("/v1/runs", content=LARGE_MALFORMED, headers=headers)
            assert response.status_code == 401 and response.json()["error"]["code"] == "authentication_required"


# --- the events server (ASGI) --------------------------------------------------------------------------------------


def asgi_call(headers: list[tuple[bytes, bytes]], chunks: list[bytes] | None, *, endless: bool = False) -> Any:
    """One request to kagent.asgi's application, in this process: (status, body, how many times it read)."""
    from kagent.asgi import application

    received = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal received
        received += 1
        if endless:
            return {"type": "http.request", "body": b"x" * 65536, "more_body": True}
        assert chunks is not None
        if received > len(chunks):
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunks[received - 1], "more_body": received < len(chunks)}

    async def send_(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/runs",
        "raw_path": b"/v1/runs",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), (b"authorization", f"Bearer {wrong_key()}".encode()), *headers],
        "client": ("203.0.113.9", 50000),
        "server": ("127.0.0.1", 8001),
    }
    asyncio.run(application(scope, receive, send_))
    start = next(message for message in sent if message["type"] == "http.response.start")
    body = b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")
    return start["status"], json.loads(body), received


def test_the_events_server_refuses_a_declared_body_over_the_limit_without_reading_it():
    # Django's ASGI handler reads the whole body (into a temporary file) before any middleware or view runs.
    declared = str(django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1).encode()
    status, body, received = asgi_call([(b"content-length", declared), (b"content-type", b"application/json")], [])
    assert (status, body["error"]["code"], received) == (413, "request_too_large", 0)


def test_the_events_server_stops_reading_a_body_without_a_length_at_the_limit():
    status, body, received = asgi_call([(b"content-type", b"application/json")], None, endless=True)
    assert (status, body["error"]["code"]) == (413, "request_too_large")
    assert received <= django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 65536 + 2


# --- failed authentication, per client address ---------------------------------------------------------------------


def test_wrong_keys_from_one_address_are_refused_for_the_minute_and_only_there(alice, settings):
    settings.KAGENT_AUTH_FAILURES = 3
    guesser = APIClient(REMOTE_ADDR="203.0.113.66", HTTP_AUTHORIZATION=f"Bearer {wrong_key()}")
    answers = [guesser.get("/v1/agents") for _ in range(3)]
    assert [(r.status_code, error(r)) for r in answers] == [(401, "invalid_api_key")] * 3
    refused = guesser.get("/v1/agents")
    assert refused.status_code == 429 and error(refused) == "rate_limited"
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["error"]["details"] == {"retry_after": int(refused["Retry-After"])}
    assert "API key" in refused.json()["error"]["message"]
    # any key that isn't one, a malformed one and a huge body alike, costs no more than that
    malformed = APIClient(REMOTE_ADDR="203.0.113.66", HTTP_AUTHORIZATION="Bearer nope")
    assert malformed.get("/v1/agents").status_code == 429
    assert send(guesser, "POST", "/v1/runs", HUGE_MALFORMED).status_code == 429

    # another address is not held by it
    elsewhere = APIClient(REMOTE_ADDR="198.51.100.23", HTTP_AUTHORIZATION=f"Bearer {wrong_key()}")
    assert elsewhere.get("/v1/agents").status_code == 401
    assert alice.client().get("/v1/agents", REMOTE_ADDR="198.51.100.23").status_code == 200
    # nor is a valid key from the guessing address (a business's server behind the same NAT keeps working)
    assert alice.client().get("/v1/agents", REMOTE_ADDR="203.0.113.66").status_code == 200


def test_successful_requests_are_not_counted(alice, settings):
    settings.KAGENT_AUTH_FAILURES = 3
    api = alice.client()
    assert all(api.get("/v1/agents", REMOTE_ADDR="192.0.2.8").status_code == 200 for _ in range(10))
    wrong = APIClient(REMOTE_ADDR="192.0.2.8", HTTP_AUTHORIZATION=f"Bearer {wrong_key()}")
    assert [wrong.get("/v1/agents").status_code for _ in range(4)] == [401, 401, 401, 429]


def test_a_revoked_key_counts_as_a_failure(alice, settings):
    from django.utils import timezone

    from kagent.models import ApiKey

    settings.KAGENT_AUTH_FAILURES = 2
    ApiKey.objects.filter(digest=ApiKey.digest_of(alice.secret_key)).update(revoked_at=timezone.now())
    codes = [error(alice.client().get("/v1/agents", REMOTE_ADDR="192.0.2.9")) for _ in range(3)]
    assert codes == ["api_key_revoked", "api_key_revoked", "rate_limited"]


def test_behind_a_trusted_proxy_each_client_address_has_its_own_count(alice, settings):
    settings.KAGENT_AUTH_FAILURES = 2
    settings.KAGENT_TRUSTED_PROXIES = ["10.0.0.0/8"]

    def guess(address: str) -> int:
        return int(
            APIClient(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=address, HTTP_AUTHORIZATION=f"Bearer {wrong_key()}")
            .get("/v1/agents")
            .status_code
        )

    assert [guess("203.0.113.70") for _ in range(3)] == [401, 401, 429]
    assert guess("203.0.113.71") == 401  # the proxy's other clients are not held by one of them


def test_an_ipv6_client_is_counted_by_its_64_block(alice, settings):
    # One subscriber holds a /64 (2^64 addresses): counted per address, it could guess without end.
    settings.KAGENT_AUTH_FAILURES = 2

    def guess(address: str) -> int:
        return int(
            APIClient(REMOTE_ADDR=address, HTTP_AUTHORIZATION=f"Bearer {wrong_key()}").get("/v1/agents").status_code
        )

    assert [guess(f"2001:db8:1:2::{n}") for n in range(1, 4)] == [401, 401, 429]
    assert guess("2001:db8:1:3::1") == 401
