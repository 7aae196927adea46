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
