"""`/v1/knowledge_sources…` over the API: text and api sources, PATCH, refresh, and api sources fetched from the
business's HTTPS API (the real TLS fake on loopback) through the hardened client, signed, on a schedule and on
demand, keeping the last good passages when a fetch fails. Someone else's project is a 404 everywhere."""

from __future__ import annotations

from typing import Any

import pytest

from agents import selectors, services
from agents.models import Agent, KnowledgeSource
from agents.tasks import knowledge_fetch
from kagent.models import EgressEvent, SigningSecret
from kagent.secrets import signing_secrets_valid
from tests.conftest import make_tenant, wait_for
from tests.kagent.test_auth import error

FAQ = {
    "data": {
        "faqs": [
            {"question": "How long is the warranty on phones?", "answer": "Phones have a 2-year warranty.", "id": 7},
            {"question": "Do you deliver to Oman?", "answer": "Yes, in 5 to 8 working days.", "id": 8},
        ]
    }
}
RESPONSE = {
    "items_path": "data.faqs",
    "fields": [{"path": "question", "label": "Question"}, {"path": "answer", "label": "Answer"}],
}


@pytest.fixture
def sent(monkeypatch: Any) -> list[tuple[str, tuple[Any, ...]]]:
    """Tasks queued by the services (by name, after commit), instead of a broker."""
    from kagent import broker

    queued: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(broker, "send", lambda name, *args, **kw: queued.append((name, args)))
    return queued


def api_source(api: Any, upstream: Any, name: str = "faq", **body: Any) -> dict[str, Any]:
    response = api.post(
        "/v1/knowledge_sources",
        {
            "title": "FAQ",
            "kind": "api",
            "url": f"https://tools.test:8443/respond/{name}",
            "response": RESPONSE,
            **body,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()


def fetch(source_id: str) -> None:
    """What the worker does with the queued task (retries run at once here)."""
    knowledge_fetch.apply(args=(source_id,))


def found(project: Any, query: str) -> list[str]:
    agent = Agent.objects.filter(project=project).first() or Agent.objects.create(project=project, name="a")
    return [hit.text for hit in selectors.knowledge_search(project_id=project.pk, agent_id=agent.pk, query=query)]


@pytest.mark.django_db
def test_text_sources_create_patch_delete(api: Any, alice: Any) -> None:
    created = api.post(
        "/v1/knowledge_sources",
        {"title": "Hours", "content": "# Hours\n\nOpen 9 to 5.\n\n## Ramadan\nOpen at night."},
        format="json",
    )
    assert created.status_code == 201, created.json()
    source = created.json()
    assert {k: source[k] for k in ("object", "kind", "url", "response", "refresh_minutes", "fetch", "passages")} == {
        "object": "knowledge_source",
        "kind": "text",
        "url": None,
        "response": None,
        "refresh_minutes": None,
        "fetch": None,
        "passages": 2,
    }
    patched = api.patch(f"/v1/knowledge_sources/{source['id']}", {"content": "Closed on Fridays."}, format="json")
    assert patched.status_code == 200 and patched.json()["passages"] == 1
    assert found(alice.project, "friday") and not found(alice.project, "ramadan")
    assert (
        api.patch(f"/v1/knowledge_sources/{source['id']}", {"searchable": False}, format="json").json()["searchable"]
        is False
    )
    assert not found(alice.project, "friday")

    for body, code in [
        ({"url": "https://tools.test/x"}, "invalid_request"),  # api only
        ({"refresh_minutes": 30}, "invalid_request"),
        ({"kind": "api"}, "invalid_request"),  # create only
        ({"content": ""}, "invalid_request"),
        ({"title": " "}, "invalid_request"),
    ]:
        response = api.patch(f"/v1/knowledge_sources/{source['id']}", body, format="json")
        assert (response.status_code, error(response)) == (422, code), body
    refresh = api.post(f"/v1/knowledge_sources/{source['id']}/refresh", format="json")
    assert (refresh.status_code, error(refresh)) == (409, "not_refreshable")

    assert api.delete(f"/v1/knowledge_sources/{source['id']}").json()["deleted"] is True
    assert api.get(f"/v1/knowledge_sources/{source['id']}").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "code", "path"),
    [
        ({"title": "x"}, "invalid_request", "$.content"),
        ({"title": "x", "kind": "api", "response": RESPONSE}, "invalid_request", "$.url"),
        ({"title": "x", "kind": "api", "url": "https://tools.test/faq"}, "invalid_request", "$.response"),
        ({"title": "x", "content": "y", "url": "https://tools.test/faq"}, "invalid_request", "$.url"),
        ({"title": "x", "kind": "api", "url": "http://tools.test/faq", "response": RESPONSE}, "invalid_url", "$.url"),
        ({"title": "x", "kind": "api", "url": "https://tools.test:80/f", "response": RESPONSE}, "invalid_url", "$.url"),
        ({"title": "x", "kind": "api", "url": "https://10.0.0.5/faq", "response": RESPONSE}, "invalid_url", "$.url"),
        ({"title": "x", "kind": "api", "url": "https://u:p@tools.test/", "response": RESPONSE}, "invalid_url", "$.url"),
        (
            {"title": "x", "kind": "api", "url": "https://tools.test/{{end_user.external_id}}", "response": RESPONSE},
            "invalid_url",
            "$.url",
        ),
        (
            {"title": "x", "kind": "api", "url": "https://tools.test/f", "response": RESPONSE, "refresh_minutes": 5},
            "invalid_request",
            "$.refresh_minutes",
        ),
        (
            {"title": "x", "kind": "api", "url": "https://tools.test/f", "response": {"fields": []}},
            "invalid_request",
            "$.response.fields",
        ),
        ({"title": "x", "content": "y", "agent": "agt_01jzzzzzzzzzzzzzzzzzzzzzzz"}, "not_found", None),
    ],
)
def test_sources_are_checked_when_written(api: Any, egress_settings: Any, body: Any, code: str, path: Any) -> None:
    response = api.post("/v1/knowledge_sources", body, format="json")
    assert error(response) == code, response.json()
    if path is not None:
        assert response.status_code == 422
        assert response.json()["error"]["details"][0]["path"] == path, response.json()


@pytest.mark.django_db
def test_someone_elses_sources_are_404(api: Any, bob: Any) -> None:
    source = api.post("/v1/knowledge_sources", {"title": "t", "content": "c"}, format="json").json()["id"]
    other = bob.client()
    assert other.get(f"/v1/knowledge_sources/{source}").status_code == 404
    assert other.patch(f"/v1/knowledge_sources/{source}", {"title": "mine"}, format="json").status_code == 404
    assert other.post(f"/v1/knowledge_sources/{source}/refresh").status_code == 404
    assert other.delete(f"/v1/knowledge_sources/{source}").status_code == 404
    assert other.get("/v1/knowledge_sources").json()["data"] == []
    assert api.get(f"/v1/knowledge_sources/{source}").json()["title"] == "t"


@pytest.mark.django_db
def test_api_source_fetched_signed_shaped_and_searched(
    api: Any, alice: Any, upstream: Any, egress_settings: Any, sent: Any, django_capture_on_commit_callbacks: Any
) -> None:
    upstream.secrets = signing_secrets_valid(project=alice.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    upstream.respond("faq", json_body=FAQ)
    with django_capture_on_commit_callbacks(execute=True):
        source = api_source(api, upstream)
    assert source["refresh_minutes"] == 60 and source["passages"] == 0
    assert source["fetch"]["status"] is None and source["fetch"]["queued"] is True
    assert sent == [("agents.knowledge_fetch", (source["id"],))]  # fetched right after the commit

    fetch(source["id"])
    [request] = upstream.received
    assert request.method == "GET" and request.path == "/respond/faq"
    assert all(request.signature_valid) and request.headers["webhook-id"].startswith("kfetch_")
    assert request.headers["user-agent"] == "K-Agent/1"
    event = EgressEvent.objects.get(project=alice.project)
    assert (event.purpose, event.decision, event.status) == ("knowledge", "allowed", 200)

    after = api.get(f"/v1/knowledge_sources/{source['id']}").json()
    assert after["passages"] == 2
    assert after["fetch"] | {"at": None, "next_at": None} == {
        "status": "succeeded",
        "at": None,
        "error_code": None,
        "http_status": 200,
        "queued": False,
        "next_at": None,
    }
    assert "Question: Do you deliver to Oman?" in after["content"]
    assert found(alice.project, "shipping to oman") == [
        "Question: Do you deliver to Oman?\nAnswer: Yes, in 5 to 8 working days."
    ]


@pytest.mark.django_db
def test_a_failed_refresh_keeps_the_last_good_passages(
    api: Any, alice: Any, upstream: Any, egress_settings: Any, sent: Any
) -> None:
    upstream.secrets = signing_secrets_valid(project=alice.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    upstream.respond("faq", json_body=FAQ)
    source = api_source(api, upstream)["id"]
    fetch(source)
    assert found(alice.project, "warranty phones")

    upstream.respond("faq", status=503, json_body={"error": "down"})
    fetch(source)  # retried twice at once here, with the same webhook-id
    assert len({r.headers["webhook-id"] for r in upstream.received[1:]}) == 1 and len(upstream.received) == 4
    failed = api.get(f"/v1/knowledge_sources/{source}").json()
    assert (failed["fetch"]["status"], failed["fetch"]["error_code"], failed["fetch"]["http_status"]) == (
        "failed",
        "upstream_status",
        503,
    )
    assert failed["passages"] == 2 and found(alice.project, "warranty phones")

    upstream.respond("faq", body=b"<html>maintenance</html>")
    fetch(source)
    assert KnowledgeSource.objects.get(pk=source).last_fetch_error == "unreadable"
    assert found(alice.project, "warranty phones")

    upstream.respond("faq", json_body={"data": {"faqs": [{"question": "Gift wrap?", "answer": "15 SAR an item."}]}})
    assert api.post(f"/v1/knowledge_sources/{source}/refresh").status_code == 202
    fetch(source)
    assert found(alice.project, "gift wrapping") and not found(alice.project, "warranty phones")
    assert KnowledgeSource.objects.get(pk=source).last_fetch_status == "succeeded"


@pytest.mark.django_db
def test_refused_addresses_are_recorded_and_never_reached(
    api: Any, alice: Any, upstream: Any, egress_settings: Any, internal: Any, sent: Any
) -> None:
    # Addresses are checked when connecting, after DNS: the refusal is written. The service's own hosts are known
    # without a lookup: refused when the source is saved, as the call would refuse them.
    response = api.post(
        "/v1/knowledge_sources",
        {"title": "x", "kind": "api", "url": "https://internal.test:8443/faq", "response": RESPONSE},
        format="json",
    )
    assert response.status_code == 201
    fetch(response.json()["id"])
    source = KnowledgeSource.objects.get(pk=response.json()["id"])
    assert source.last_fetch_status == "failed" and source.passage_count == 0
    assert source.last_fetch_error == "address_not_allowed"
    assert set(EgressEvent.objects.filter(project=alice.project).values_list("decision", flat=True)) == {"refused"}
    own = api.post(
        "/v1/knowledge_sources",
        {"title": "x", "kind": "api", "url": "https://kagent.test/faq", "response": RESPONSE},
        format="json",
    )
    assert own.status_code == 422 and "own hosts" in own.json()["error"]["message"]
    assert KnowledgeSource.objects.filter(project=alice.project).count() == 1
    assert upstream.received == []


@pytest.mark.django_db
def test_schedule_and_on_demand_refresh_queue_one_fetch_at_a_time(
    api: Any, alice: Any, upstream: Any, egress_settings: Any, sent: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    upstream.respond("faq", json_body=FAQ)
    source = api_source(api, upstream, refresh_minutes=15)["id"]
    fetch(source)
    sent.clear()
    assert services.knowledge_refresh_due() == {"queued": 0, "reindexed": 0}  # not due yet

    KnowledgeSource.objects.filter(pk=source).update(next_fetch_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert services.knowledge_refresh_due() == {"queued": 1, "reindexed": 0}
        assert services.knowledge_refresh_due() == {"queued": 0, "reindexed": 0}  # claimed: moved 15 minutes on
    assert sent == [("agents.knowledge_fetch", (source,))]
    next_at = KnowledgeSource.objects.get(pk=source).next_fetch_at
    assert next_at is not None and timedelta(minutes=14) < next_at - timezone.now() <= timedelta(minutes=15)

    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(3):  # already queued: no second fetch
            assert api.post(f"/v1/knowledge_sources/{source}/refresh").status_code == 202
    assert len(sent) == 1
    fetch(source)
    with django_capture_on_commit_callbacks(execute=True):
        refreshed = api.post(f"/v1/knowledge_sources/{source}/refresh")
    assert refreshed.json()["fetch"]["queued"] is True and len(sent) == 2

    patched = api.patch(f"/v1/knowledge_sources/{source}", {"refresh_minutes": 120}, format="json").json()
    assert patched["refresh_minutes"] == 120


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_fetches_a_new_api_source(start_worker: Any, upstream: Any, egress_settings: Any) -> None:
    tenant = make_tenant("alice")
    upstream.secrets = signing_secrets_valid(project=tenant.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    upstream.respond("faq", json_body=FAQ)
    start_worker(
        {
            "KAGENT_EGRESS_ALLOW_NETWORKS": " ".join(egress_settings.KAGENT_EGRESS_ALLOW_NETWORKS),
            "KAGENT_EGRESS_CA_BUNDLE": egress_settings.KAGENT_EGRESS_CA_BUNDLE,
            "KAGENT_EGRESS_RESOLVE": egress_settings.KAGENT_EGRESS_RESOLVE,
        }
    )
    source = api_source(tenant.client(), upstream)["id"]
    wait_for(
        lambda: KnowledgeSource.objects.get(pk=source).last_fetch_status == "succeeded",
        timeout=40,
        message="the worker's fetch",
    )
    assert KnowledgeSource.objects.get(pk=source).passage_count == 2
    assert all(upstream.received[0].signature_valid)


LONG_NUMBER = "7" * 5000


@pytest.mark.django_db
def test_a_5000_digit_number_is_written_and_the_rest_stays_searchable(api: Any, alice: Any) -> None:
    """Second security review, item 7: PostgreSQL refuses a search term over 2 KB; such a "word" isn't a term."""
    body = {"title": "Serials", "kind": "text", "content": f"Warranty serial {LONG_NUMBER} covers phones."}
    response = api.post("/v1/knowledge_sources", body, format="json")
    assert response.status_code == 201, response.json()
    assert found(alice.project, "warranty phones")


@pytest.mark.django_db
def test_an_api_fetch_the_index_refuses_is_recorded_as_failed(
    api: Any, alice: Any, upstream: Any, egress_settings: Any, sent: Any, monkeypatch: Any
) -> None:
    upstream.secrets = signing_secrets_valid(project=alice.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    upstream.respond("faq", json_body=FAQ)
    source = api_source(api, upstream)["id"]
    fetch(source)
    long_faq = {"data": {"faqs": [{"question": f"Serial {LONG_NUMBER}?", "answer": "Gift wrap is 15 SAR."}]}}
    upstream.respond("faq", json_body=long_faq)
    fetch(source)  # indexed: the long number left out
    assert found(alice.project, "gift wrap")

    # Whatever else the database refuses of a fetched content (a fault injected here): recorded, the old passages kept.
    from django.db import DataError

    from agents import services as agent_services

    def refused(**kwargs: Any) -> int:
        raise DataError("refused by the index")

    monkeypatch.setattr(agent_services, "replace_passages", refused)
    upstream.respond("faq", json_body=FAQ)
    fetch(source)
    failed = api.get(f"/v1/knowledge_sources/{source}").json()
    assert (failed["fetch"]["status"], failed["fetch"]["error_code"]) == ("failed", "unindexable")
    assert found(alice.project, "gift wrap") and not found(alice.project, "warranty phones")
