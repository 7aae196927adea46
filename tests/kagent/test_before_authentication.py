"""What a request costs before its API key is known (issue 27, finding 3): nothing reads its body, let alone parses
it, before the key is checked, for every operation of the OpenAPI document; the events server (ASGI) reads at most
DATA_UPLOAD_MAX_MEMORY_SIZE of it; and requests with a key that isn't valid are limited per client address."""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test.client import FakePayload
from django.urls import resolve
from rest_framework.test import APIClient

from kagent.api import ProjectApi
from kagent.parsers import StrictJSONParser
from tests.kagent.test_auth import error

pytestmark = pytest.mark.django_db

# Over 2.5 MB and not JSON: parsed, it would be a 400 `invalid_json` (or, read through `request.body`, a 413).
HUGE_MALFORMED = b'{"agent": "agt_x", "input": "' + b"x" * 2_700_000 + b"\\"


@pytest.fixture(autouse=True)
def fresh_counters(settings):
    # Counters of this test's own: a namespace no other test process (sharing the Redis database) writes to.
    settings.CACHES = {name: {**config, "KEY_PREFIX": uuid.uuid4().hex} for name, config in settings.CACHES.items()}


def wrong_key() -> str:
    return "ka_sk_" + secrets.token_urlsafe(32)  # the shape of a key (43 characters), of no project


@pytest.fixture
def body_reads(monkeypatch) -> list[str]:
    """Every read of a request's body, and every parse of one, as it happens: the test client's `wsgi.input` is a
    FakePayload, which everything that reads a body (`request.body`, `request.POST`, DRF's parsers) reads from."""
    seen: list[str] = []
    read, readline, parse = FakePayload.read, FakePayload.readline, StrictJSONParser.parse

    def spy_read(self: FakePayload, *args: Any, **kwargs: Any) -> bytes:
        seen.append("read")
        return read(self, *args, **kwargs)

    def spy_readline(self: FakePayload, *args: Any, **kwargs: Any) -> bytes:
        seen.append("readline")
        return readline(self, *args, **kwargs)

    def spy_parse(self: StrictJSONParser, *args: Any, **kwargs: Any) -> Any:
        seen.append("parse")
        return parse(self, *args, **kwargs)

    monkeypatch.setattr(FakePayload, "read", spy_read)
    monkeypatch.setattr(FakePayload, "readline", spy_readline)
    monkeypatch.setattr(StrictJSONParser, "parse", spy_parse)
    return seen


def send(client: APIClient, method: str, path: str, body: bytes, **extra: Any) -> Any:
    return client.generic(method, path, body, content_type="application/json", **extra)


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
            body_reads.clear()
            extra = {"HTTP_AUTHORIZATION": header} if header else {}
            response = send(APIClient(), method, path, HUGE_MALFORMED, **extra)
            if (response.status_code, error(response)) != (status, code) or body_reads:
                problems.append(f"{method} {path} with {label}: {response.status_code} {error(response)} {body_reads}")
        if not view.publishable_allowed:  # a visitor's key where only the business's server may go: 403, unread
            body_reads.clear()
            response = send(alice.client(alice.publishable_key), method, path, HUGE_MALFORMED)
            if response.status_code != 403 or body_reads:
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
