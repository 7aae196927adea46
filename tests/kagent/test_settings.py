"""Settings: PostgreSQL and Redis always — the embedded servers' sockets under var/ by default, the URLs given
otherwise; nothing else is accepted."""

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

PROBE = (
    "import django, json; django.setup(); from django.conf import settings as s; from kagent.celery import app;"
    "db = s.DATABASES['default'];"
    "print(json.dumps({'engine': db['ENGINE'], 'name': str(db['NAME']), 'host': db.get('OPTIONS', {}).get('host'),"
    "'broker': app.conf.broker_url, 'cache': s.CACHES['default']['BACKEND'],"
    "'cache_location': s.CACHES['default']['LOCATION'], 'debug': s.DEBUG}))"
)


def probe(env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY", "KAGENT_ENCRYPTION_KEYS"}
    }
    base.update(env, DJANGO_SETTINGS_MODULE="kagent.settings", KAGENT_VAR_DIR=str(ROOT / "var" / "probe"))
    return subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=base, capture_output=True, text=True, timeout=60)


PROBE_VAR = ROOT / "var" / "probe"


def test_without_urls_the_embedded_servers_sockets_under_var():
    result = probe({"DEBUG": "true"})
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["engine"] == "django.db.backends.postgresql"
    assert got["name"] == "kagent"
    assert got["host"] == str(PROBE_VAR / "postgres")  # the socket's folder: no TCP port
    assert got["broker"] == f"kagent+socket://{PROBE_VAR}/redis/redis.sock?virtual_host=0"
    assert got["cache"].endswith("kagent.cache.RedisCache")
    assert got["cache_location"] == f"unix://{PROBE_VAR}/redis/redis.sock?db=0"


def test_a_database_or_redis_url_of_another_kind_is_refused():
    result = probe({"DEBUG": "true", "DATABASE_URL": "sqlite:///var/kagent.sqlite3"})
    assert result.returncode != 0
    assert "DATABASE_URL must be a PostgreSQL URL" in result.stderr
    result = probe({"DEBUG": "true", "REDIS_URL": "filesystem://"})
    assert result.returncode != 0
    assert "REDIS_URL must be a Redis URL" in result.stderr


def test_postgres_and_redis_when_urls_are_set():
    result = probe(
        {
            "DEBUG": "true",
            "DATABASE_URL": "postgres://u:p@db.internal:5433/kagent",
            "REDIS_URL": "redis://cache.internal:6380/2",
        }
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["engine"] == "django.db.backends.postgresql"
    assert got["name"] == "kagent"
    assert got["broker"] == "redis://cache.internal:6380/2"
    assert got["cache"].endswith("RedisCache")


def test_production_refuses_to_start_without_secrets():
    result = probe({"DEBUG": "false"})
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr
    result = probe({"DEBUG": "false", "SECRET_KEY": "x" * 50})
    assert result.returncode != 0
    assert "KAGENT_ENCRYPTION_KEYS must be set" in result.stderr


def test_malformed_encryption_key_is_refused():
    result = probe({"DEBUG": "true", "KAGENT_ENCRYPTION_KEYS": "c2hvcnQ="})
    assert result.returncode != 0
    assert "32 bytes" in result.stderr


def test_bad_boolean_is_refused_not_guessed():
    result = probe({"DEBUG": "maybe"})
    assert result.returncode != 0
    assert "DEBUG must be true or false" in result.stderr


SECURITY_PROBE = (
    "import django, json; django.setup(); from django.conf import settings as s;"
    "print(json.dumps({'session': s.SESSION_COOKIE_SECURE, 'csrf': s.CSRF_COOKIE_SECURE,"
    " 'hsts': s.SECURE_HSTS_SECONDS, 'proxy': s.SECURE_PROXY_SSL_HEADER}))"
)
PRODUCTION = {"DEBUG": "false", "SECRET_KEY": "x" * 50, "KAGENT_ENCRYPTION_KEYS": "a" * 43 + "="}


def security(env: dict[str, str]) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "KAGENT_HTTPS", "SESSION_COOKIE_SECURE"}}
    base.update(env, DJANGO_SETTINGS_MODULE="kagent.settings", KAGENT_VAR_DIR=str(ROOT / "var" / "probe"))
    result = subprocess.run(
        [sys.executable, "-c", SECURITY_PROBE], cwd=ROOT, env=base, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_production_cookies_are_secure_and_hsts_is_on_by_default():
    # Issue #13, finding 6: Secure cookies only with KAGENT_HTTPS set, and no HSTS behind the TLS proxy.
    got = security(PRODUCTION)
    assert got["session"] is True and got["csrf"] is True
    assert got["hsts"] >= 31_536_000
    assert got["proxy"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_a_laptop_on_plain_http_keeps_working():
    # bin/run sets DEBUG=true and serves http://127.0.0.1:8000/: Secure cookies would never come back.
    got = security({"DEBUG": "true"})
    assert got == {"session": False, "csrf": False, "hsts": 0, "proxy": None}


def test_production_on_plain_http_when_said_so():
    got = security({**PRODUCTION, "KAGENT_HTTPS": "false"})
    assert got == {"session": False, "csrf": False, "hsts": 0, "proxy": None}
    assert security({**PRODUCTION, "KAGENT_HSTS_SECONDS": "600"})["hsts"] == 600
