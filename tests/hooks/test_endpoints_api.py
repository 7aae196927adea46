"""`/v1/webhook_endpoints`: create (the secret shown once), list, read, change, delete, rotate; URLs checked like an
HTTP tool's; another project's endpoint is a 404; a publishable key is refused."""

from __future__ import annotations

import pytest

from hooks.models import WebhookEndpoint
from tests.hooks.conftest import EVERY_TYPE

pytestmark = pytest.mark.django_db

URL = "https://hooks.shop.example/k-agent"


def create(api, **body):
    return api.post("/v1/webhook_endpoints", {"url": URL, "event_types": ["ticket.created"], **body}, format="json")


def test_create_shows_the_secret_once_and_stores_it_encrypted(api):
    response = create(api, description="Helpdesk", event_types=["ticket.updated", "ticket.created"])
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["secret"].startswith("whsec_") and len(body["secret"]) > 40
    assert body["url"] == URL and body["enabled"] is True and body["disabled_reason"] is None
    assert body["event_types"] == ["ticket.created", "ticket.updated"]  # the product's order
    assert body["description"] == "Helpdesk"

    read = api.get(f"/v1/webhook_endpoints/{body['id']}").json()
    assert "secret" not in read and read["id"] == body["id"]
    listed = api.get("/v1/webhook_endpoints").json()
    assert [e["id"] for e in listed["data"]] == [body["id"]] and "secret" not in listed["data"][0]

    row = WebhookEndpoint.objects.get(pk=body["id"])
    assert body["secret"].encode() not in bytes(row.secret_ciphertext)
    assert body["secret"][6:].encode() not in bytes(row.secret_ciphertext)


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.shop.example/x",  # not https
        "https://user:pw@hooks.shop.example/x",  # identity in the URL
        "https://hooks.shop.example:8080/x",  # a port the outbound client doesn't use
        "https://127.0.0.1/x",  # an address, not a name
        "https://hooks.shop.example/{{args.id}}",  # placeholders
        "https://hooks.shop.example\\@evil.example/",
        "https://hooks.shop.example/x#frag",
        "",
    ],
)
def test_urls_are_checked_like_an_http_tools(api, url):
    response = create(api, url=url)
    assert response.status_code == 422, response.json()
    assert response.json()["error"]["code"] in ("invalid_url", "url_not_allowed")
    assert WebhookEndpoint.objects.count() == 0


def test_a_url_that_delivery_would_refuse_is_refused_at_save_in_words_about_webhooks(api, settings):
    # The service's own host was accepted at save and only refused at the first delivery; an http:// URL was refused
    # with words about knowledge sources.
    settings.KAGENT_OWN_HOSTS = ["kagent.example.com"]
    for url, words in [
        ("http://hooks.shop.example/x", "A webhook endpoint's URL starts with https://"),
        ("https://kagent.example.com/hooks", "K-Agent won't send to this URL: K-Agent's own hosts"),
        ("https://api.kagent.example.com/hooks", "K-Agent won't send to this URL: K-Agent's own hosts"),
    ]:
        response = create(api, url=url)
        assert response.status_code == 422, url
        error = response.json()["error"]
        assert error["code"] == "invalid_url" and error["message"].startswith(words), error
        assert error["details"] == [{"path": "$.url", "message": error["message"]}]
        assert "knowledge" not in error["message"]
    endpoint = create(api).json()["id"]
    moved = api.patch(f"/v1/webhook_endpoints/{endpoint}", {"url": "https://kagent.example.com/x"}, format="json")
    assert moved.status_code == 422 and "own hosts" in moved.json()["error"]["message"]
    assert WebhookEndpoint.objects.get(pk=endpoint).url == URL


@pytest.mark.parametrize(
    ("event_types", "code"),
    [
        (["ticket.exploded"], "invalid_event_types"),
        ([], "invalid_event_types"),
        (["ticket.created", "ticket.created"], "invalid_event_types"),
        ("ticket.created", "invalid_event_types"),
    ],
)
def test_event_types_are_a_subset_of_the_nine(api, event_types, code):
    response = create(api, event_types=event_types)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == code


def test_hostile_bodies_get_a_clear_error_and_write_nothing(api):
    assert create(api, description="x" * 501).status_code == 422
    assert create(api, url="https://" + "a" * 3000 + ".example/").status_code == 422
    assert create(api, surprise=True).status_code == 422
    assert api.post("/v1/webhook_endpoints", [], format="json").status_code == 400
    assert WebhookEndpoint.objects.count() == 0


def test_at_most_twenty_endpoints(api):
    for _ in range(20):
        assert create(api).status_code == 201
    over = create(api)
    assert over.status_code == 409 and over.json()["error"]["code"] == "too_many_endpoints"


def test_change_disable_enable_and_delete(api):
    endpoint = create(api).json()["id"]
    changed = api.patch(
        f"/v1/webhook_endpoints/{endpoint}", {"event_types": EVERY_TYPE, "enabled": False}, format="json"
    ).json()
    assert changed["event_types"] == EVERY_TYPE
    assert changed["enabled"] is False and changed["disabled_reason"] == "Disabled by the project."
    enabled = api.patch(f"/v1/webhook_endpoints/{endpoint}", {"enabled": True}, format="json").json()
    assert enabled["enabled"] is True and enabled["disabled_reason"] is None
    bad = api.patch(f"/v1/webhook_endpoints/{endpoint}", {"url": "http://x.example/"}, format="json")
    assert bad.status_code == 422
    assert api.get(f"/v1/webhook_endpoints/{endpoint}").json()["url"] == URL
    deleted = api.delete(f"/v1/webhook_endpoints/{endpoint}")
    assert deleted.json() == {"id": endpoint, "object": "webhook_endpoint", "deleted": True}
    assert api.get(f"/v1/webhook_endpoints/{endpoint}").status_code == 404


def test_rotation_shows_the_new_secret_once_and_keeps_the_old_one_for_a_day(api):
    created = create(api).json()
    rotated = api.post(f"/v1/webhook_endpoints/{created['id']}/rotate_secret")
    assert rotated.status_code == 200
    body = rotated.json()
    assert body["secret"].startswith("whsec_") and body["secret"] != created["secret"]
    assert body["previous_secret_expires_at"] is not None
    assert body["previous_secret_expires_at"] - body["created_at"] >= 24 * 3600 - 5
    assert "secret" not in api.get(f"/v1/webhook_endpoints/{created['id']}").json()


def test_someone_elses_endpoints_are_404(api, bob):
    endpoint = create(api).json()["id"]
    other = bob.client()
    assert other.get(f"/v1/webhook_endpoints/{endpoint}").status_code == 404
    assert other.patch(f"/v1/webhook_endpoints/{endpoint}", {"enabled": False}, format="json").status_code == 404
    assert other.delete(f"/v1/webhook_endpoints/{endpoint}").status_code == 404
    assert other.post(f"/v1/webhook_endpoints/{endpoint}/rotate_secret").status_code == 404
    assert other.get(f"/v1/webhook_endpoints/{endpoint}/deliveries").status_code == 404
    fake_delivery = "whd_" + "0" * 26
    assert other.post(f"/v1/webhook_endpoints/{endpoint}/deliveries/{fake_delivery}/redeliver").status_code == 404
    assert other.get("/v1/webhook_endpoints").json()["data"] == []
    assert WebhookEndpoint.objects.get(pk=endpoint).enabled is True


def test_publishable_keys_are_refused(alice):
    client = alice.client(alice.publishable_key)
    response = client.get("/v1/webhook_endpoints")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "publishable_key_not_allowed"


def test_in_the_openapi_document(api):
    paths = api.get("/v1/openapi.json").json()["paths"]
    for path in (
        "/v1/webhook_endpoints",
        "/v1/webhook_endpoints/{endpoint_id}",
        "/v1/webhook_endpoints/{endpoint_id}/rotate_secret",
        "/v1/webhook_endpoints/{endpoint_id}/deliveries",
        "/v1/webhook_endpoints/{endpoint_id}/deliveries/{delivery_id}/redeliver",
    ):
        assert path in paths, path
