"""CORS for browsers using a publishable key (kagent/cors.py): a preflight is answered only for an origin some
publishable key lists; the actual request is checked against its own key's list; secret keys never get CORS
headers; the origins a key may list are exact, strictly checked origins."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from fakes.llm import calls, text
from kagent.cors import ALLOW_HEADERS, origin_parse
from kagent.errors import ApiError
from kagent.models import ApiKey
from kagent.services import api_key_origins_update, api_key_revoke
from runs import engine
from tests.conftest import Tenant, clear_cache, make_tenant
from tests.runs.test_run_events_live import asgi_server as uvicorn_events_server  # noqa: F401 (a fixture, by this name)

SHOP = "https://shop.example"
EVIL = "https://evil.example"


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    clear_cache()


def publishable(tenant: Tenant) -> ApiKey:
    return ApiKey.objects.get(project=tenant.project, kind=ApiKey.Kind.PUBLISHABLE)


def allow(tenant: Tenant, *origins: str) -> ApiKey:
    return api_key_origins_update(project=tenant.project, key_id=publishable(tenant).pk, allowed_origins=list(origins))


def preflight(client: Any, path: str, origin: str, method: str = "POST") -> Any:
    return client.options(
        path,
        HTTP_ORIGIN=origin,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD=method,
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization,content-type",
    )


def agent_for(tenant: Tenant, fake_llm: Any, script: str, turns: list[Any]) -> str:
    fake_llm.script(script, turns)
    api = tenant.client()
    config = {"model": {"provider": "openai_compatible", "name": f"script:{script}"}}
    agent = api.post("/v1/agents", {"name": script, "config": config}, format="json").json()["id"]
    assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
    return str(agent)


def test_a_preflight_is_answered_for_a_listed_origin_and_refused_for_others(alice, client):
    allow(alice, SHOP)
    answered = preflight(client, "/v1/runs", SHOP)
    assert answered.status_code == 204
    assert answered["Access-Control-Allow-Origin"] == SHOP
    assert answered["Access-Control-Allow-Methods"] == "GET, POST, OPTIONS"
    assert answered["Access-Control-Allow-Headers"] == ALLOW_HEADERS
    assert {"Authorization", "Content-Type", "Last-Event-ID"} <= set(ALLOW_HEADERS.split(", "))
    assert int(answered["Access-Control-Max-Age"]) > 0
    assert "Origin" in answered["Vary"]

    for origin in (EVIL, "https://shop.example.evil.example", "http://shop.example", "null", SHOP + "/"):
        refused = preflight(client, "/v1/runs", origin)
        assert refused.status_code == 403, origin
        assert refused.json()["error"]["code"] == "origin_not_allowed"
        assert "Access-Control-Allow-Origin" not in refused and "Access-Control-Allow-Methods" not in refused


def test_a_preflight_follows_changes_to_the_lists_at_once(alice, client, django_capture_on_commit_callbacks):
    assert preflight(client, "/v1/sessions", SHOP).status_code == 403
    with django_capture_on_commit_callbacks(execute=True):  # the cached answer is forgotten once the change commits
        allow(alice, SHOP)
    assert preflight(client, "/v1/sessions", SHOP).status_code == 204
    with django_capture_on_commit_callbacks(execute=True):
        allow(alice)  # removed again
    assert preflight(client, "/v1/sessions", SHOP).status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        allow(alice, SHOP)
    assert preflight(client, "/v1/sessions", SHOP).status_code == 204
    with django_capture_on_commit_callbacks(execute=True):
        api_key_revoke(project=alice.project, key_id=publishable(alice).pk)
    assert preflight(client, "/v1/sessions", SHOP).status_code == 403  # only active keys count


def test_the_actual_request_is_checked_against_its_own_keys_list(alice, bob, fake_llm):
    allow(alice, SHOP)
    api_key_origins_update(project=bob.project, key_id=publishable(bob).pk, allowed_origins=[EVIL])
    agent = agent_for(alice, fake_llm, "cors-run", [text("hello from the shop")])
    browser = alice.client(alice.publishable_key)

    made = browser.post("/v1/sessions", {"agent": agent}, format="json", HTTP_ORIGIN=SHOP)
    assert made.status_code == 201
    assert made["Access-Control-Allow-Origin"] == SHOP
    assert "Retry-After" in made["Access-Control-Expose-Headers"]
    assert "Origin" in made["Vary"]
    assert "Access-Control-Allow-Credentials" not in made

    # An origin another project's key lists passed the preflight, but this key doesn't list it: refused, nothing made.
    before = ApiKey.objects.count()
    for path, body in (("/v1/sessions", {"agent": agent}), ("/v1/runs", {"agent": agent, "input": "hi"})):
        refused = browser.post(path, body, format="json", HTTP_ORIGIN=EVIL)
        assert refused.status_code == 403, path
        assert refused.json()["error"]["code"] == "origin_not_allowed"
        assert "Access-Control-Allow-Origin" not in refused
    assert ApiKey.objects.count() == before
    from conversations.models import Session
    from runs.models import Run

    assert Session.objects.filter(project=alice.project).count() == 1
    assert Run.objects.filter(project=alice.project).count() == 0

    # No Origin header (a server, a mobile app): nothing to check, no CORS headers.
    plain = browser.post("/v1/sessions", {"agent": agent}, format="json")
    assert plain.status_code == 201 and "Access-Control-Allow-Origin" not in plain


def test_errors_and_the_event_stream_carry_the_headers_for_an_allowed_origin(alice, fake_llm):
    allow(alice, SHOP)
    agent = agent_for(alice, fake_llm, "cors-stream", [text("streamed to the shop")])
    browser = alice.client(alice.publishable_key)
    session = browser.post("/v1/sessions", {"agent": agent}, format="json", HTTP_ORIGIN=SHOP).json()["id"]

    bad = browser.post("/v1/runs", {"agent": agent, "session": session}, format="json", HTTP_ORIGIN=SHOP)
    assert bad.status_code == 422 and bad["Access-Control-Allow-Origin"] == SHOP  # the page can read the error

    run = browser.post(
        "/v1/runs", {"agent": agent, "session": session, "input": "hi"}, format="json", HTTP_ORIGIN=SHOP
    ).json()
    engine.run_execute(run["id"])
    stream = browser.get(
        f"/v1/runs/{run['id']}/events", HTTP_ORIGIN=SHOP, HTTP_ACCEPT="text/event-stream", HTTP_LAST_EVENT_ID="0"
    )
    assert stream.status_code == 200
    assert stream["Content-Type"].startswith("text/event-stream")
    assert stream["Access-Control-Allow-Origin"] == SHOP
    body = b"".join(stream.streaming_content).decode()
    assert "event: run.completed" in body and "streamed to the shop" in body

    refused = browser.get(f"/v1/runs/{run['id']}/events", HTTP_ORIGIN=EVIL)
    assert refused.status_code == 403 and "Access-Control-Allow-Origin" not in refused

    # "stream": true on create carries them too.
    streamed = browser.post(
        "/v1/runs",
        {"agent": agent, "session": session, "input": "again", "stream": True},
        format="json",
        HTTP_ORIGIN=SHOP,
    )
    assert streamed.status_code == 200 and streamed["Access-Control-Allow-Origin"] == SHOP
    streamed.close()


def test_secret_keys_never_get_cors_headers(alice):
    allow(alice, SHOP)
    response = alice.client().get("/v1/agents", HTTP_ORIGIN=SHOP)
    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response
    with pytest.raises(ApiError) as refused:
        api_key_origins_update(
            project=alice.project,
            key_id=ApiKey.objects.get(project=alice.project, kind=ApiKey.Kind.SECRET).pk,
            allowed_origins=[SHOP],
        )
    assert refused.value.code == "origins_for_publishable_keys_only"


def test_a_publishable_key_on_a_secret_endpoint_from_an_allowed_page_reads_the_refusal(alice):
    allow(alice, SHOP)
    response = alice.client(alice.publishable_key).get("/v1/agents", HTTP_ORIGIN=SHOP)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "publishable_key_not_allowed"
    assert response["Access-Control-Allow-Origin"] == SHOP


@pytest.mark.parametrize(
    ("raw", "origin"),
    [
        ("https://shop.example", "https://shop.example"),
        ("  HTTPS://Shop.Example  ", "https://shop.example"),
        ("https://shop.example:443", "https://shop.example"),
        ("http://localhost:3000", "http://localhost:3000"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("https://xn--bcher-kva.example", "https://xn--bcher-kva.example"),
    ],
)
def test_origins_are_normalized_as_browsers_send_them(raw, origin):
    assert origin_parse(raw) == origin


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("shop.example", "like https://shop.example"),
        ("https://shop.example/", "no path"),
        ("https://shop.example/cart?x=1", "no path"),
        ("https://*.shop.example", "wildcards"),
        ("*", "wildcards"),
        ("null", "like https://shop.example"),
        ("ftp://shop.example", "starts with https://"),
        ("javascript://shop.example", "starts with https://"),
        ("https://user:pw@shop.example", "no user name"),
        ("https://bücher.example", "xn--"),
        ("https://shop.example:99999", "port"),
        ("https://shop.example:+443", "port"),
        ("https://shop_example.com", "letters, digits"),
        ("https://-shop.example", "letters, digits"),
        ("https://shop..example", "letters, digits"),
        ("https://[::1", "IPv6"),
        ("https://999.1.1.1", "IPv4"),
        ("https://shop.example\\@evil.example", "like https://shop.example"),
        ("https://shop.example<script>", "like https://shop.example"),
        ("https://" + "a" * 300 + ".example", "at most"),
    ],
)
def test_hostile_or_wrong_origins_are_refused_with_a_reason(raw, says):
    with pytest.raises(ValueError, match=None) as refused:
        origin_parse(raw)
    assert says in str(refused.value)


def test_the_list_names_the_wrong_entry(alice):
    with pytest.raises(ApiError) as refused:
        allow(alice, SHOP, "https://shop.example/checkout")
    assert refused.value.status == 422
    assert refused.value.code == "invalid_allowed_origins"
    assert refused.value.details[0]["path"] == "$.allowed_origins[1]"
    assert publishable(alice).allowed_origins == []
    with pytest.raises(ApiError):
        allow(alice, *[f"https://s{n}.example" for n in range(21)])
    assert allow(alice, SHOP, "HTTPS://SHOP.EXAMPLE:443").allowed_origins == [SHOP]


def test_another_projects_key_cannot_be_changed(alice, bob):
    with pytest.raises(ApiError) as refused:
        api_key_origins_update(project=alice.project, key_id=publishable(bob).pk, allowed_origins=[SHOP])
    assert refused.value.status == 404


def test_bootstrap_adds_the_demo_origin_to_the_publishable_keys(db, capsys):
    args = ["--org", "Demo", "--project", "Demo", "--email", "d@example.com", "--password", "pw", "--json"]
    call_command("kagent_bootstrap", *args, "--allowed-origin", "http://127.0.0.1:8000")
    call_command("kagent_bootstrap", *args, "--allowed-origin", "http://127.0.0.1:8000")
    [key] = ApiKey.objects.filter(kind=ApiKey.Kind.PUBLISHABLE)
    assert key.allowed_origins == ["http://127.0.0.1:8000"]
    with pytest.raises(CommandError, match="no path"):
        call_command("kagent_bootstrap", *args, "--allowed-origin", "http://127.0.0.1:8000/demo")


def test_a_browser_step_carries_the_receipt_of_a_handoff_the_tool_made(alice, fake_llm):
    handoff = ("transfer_to_human", {"reason_type": "complaint", "summary": "Parcel arrived damaged"})
    agent = agent_for(alice, fake_llm, "cors-handoff", [calls(handoff), text("A person will take over.")])
    browser = alice.client(alice.publishable_key)
    session = browser.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    run = browser.post("/v1/runs", {"agent": agent, "session": session, "input": "broken"}, format="json").json()
    engine.run_execute(run["id"])
    body = b"".join(browser.get(f"/v1/runs/{run['id']}/events").streaming_content).decode()
    from desk.models import Handoff

    made = Handoff.objects.get(session_id=session)
    assert f'"receipt":{{"handoff":{{"id":"{made.pk}","status":"open"}}}}' in body
    assert "Parcel arrived damaged" not in body  # the summary is the business's, not the browser's


@pytest.mark.django_db(transaction=True)
def test_the_events_server_answers_preflights_and_streams_with_the_headers(uvicorn_events_server, fake_llm):  # noqa: F811
    # Production serves event streams from uvicorn (kagent.asgi): the middleware's async form.
    tenant = make_tenant("alice")
    allow(tenant, SHOP)
    agent = agent_for(tenant, fake_llm, "cors-asgi", [text("through uvicorn")])
    browser = tenant.client(tenant.publishable_key)
    session = browser.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    run = browser.post("/v1/runs", {"agent": agent, "session": session, "input": "hi"}, format="json").json()
    engine.run_execute(run["id"])
    url = f"{uvicorn_events_server}/v1/runs/{run['id']}/events"
    asked = {"Origin": SHOP, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"}
    answered = httpx.options(url, headers=asked)
    assert answered.status_code == 204 and answered.headers["access-control-allow-origin"] == SHOP
    refused = httpx.options(url, headers={**asked, "Origin": EVIL})
    assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers
    headers = {"Authorization": f"Bearer {tenant.publishable_key}", "Origin": SHOP, "Accept": "text/event-stream"}
    with httpx.stream("GET", url, headers=headers, timeout=20) as stream:
        assert stream.status_code == 200
        assert stream.headers["access-control-allow-origin"] == SHOP
        assert "through uvicorn" in stream.read().decode()
    assert httpx.get(url, headers={**headers, "Origin": EVIL}).status_code == 403
