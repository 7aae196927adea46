import pytest

from kagent.celery import app


@pytest.mark.django_db
def test_healthz_reports_database_and_broker(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok"}


@pytest.mark.django_db
def test_healthz_degraded_when_broker_is_down(client, monkeypatch):
    # Fault injection: a broker nobody listens on.
    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:1/0")
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["broker"] == "unavailable"
    assert response.json()["database"] == "ok"


def test_a_post_to_healthz_is_refused_without_its_body_parsed(monkeypatch):
    """/healthz answers GET only; the CSRF check (with a CSRF cookie) would have parsed a POST's form body, up to
    2.5 MB, before the 405."""
    from django.http import HttpRequest

    parsed = []
    original = HttpRequest._load_post_and_files
    monkeypatch.setattr(
        HttpRequest, "_load_post_and_files", lambda request: parsed.append(request.path) or original(request)
    )
    from django.test import Client

    client = Client(enforce_csrf_checks=True)  # as a browser's request is checked
    client.cookies["csrftoken"] = "x" * 32
    body = "a=" + "b" * 100_000
    response = client.post("/healthz", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 405
    assert parsed == []
