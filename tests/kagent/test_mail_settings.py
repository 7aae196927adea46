"""Mail settings from the environment (invitations, password resets): Django's own names, and the public origin
links in mails point at."""

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

PROBE = (
    "import django, json; django.setup(); from django.conf import settings as s;"
    "print(json.dumps({name: getattr(s, name) for name in ('EMAIL_BACKEND', 'EMAIL_FILE_PATH', 'EMAIL_HOST',"
    "'EMAIL_PORT', 'EMAIL_HOST_USER', 'EMAIL_HOST_PASSWORD', 'EMAIL_USE_TLS', 'EMAIL_USE_SSL', 'DEFAULT_FROM_EMAIL',"
    "'KAGENT_PUBLIC_URL')}))"
)
MAIL = (
    "EMAIL_BACKEND",
    "EMAIL_FILE_PATH",
    "EMAIL_HOST",
    "EMAIL_PORT",
    "EMAIL_HOST_USER",
    "EMAIL_HOST_PASSWORD",
    "EMAIL_USE_TLS",
    "EMAIL_USE_SSL",
    "DEFAULT_FROM_EMAIL",
    "KAGENT_PUBLIC_URL",
)


def probe(env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in MAIL}
    base.update(env, DJANGO_SETTINGS_MODULE="kagent.settings", KAGENT_VAR_DIR=str(ROOT / "var" / "probe"))
    return subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=base, capture_output=True, text=True, timeout=60)


def test_unset_smtp_on_localhost_and_no_public_url():
    result = probe({})
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    assert (got["EMAIL_HOST"], got["EMAIL_PORT"], got["EMAIL_USE_TLS"]) == ("localhost", 25, False)
    assert got["EMAIL_FILE_PATH"] == str(ROOT / "var" / "probe" / "mail")
    assert got["KAGENT_PUBLIC_URL"] == ""


def test_every_mail_setting_comes_from_the_environment():
    env = {
        "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
        "EMAIL_FILE_PATH": "/tmp/kagent-mail",
        "EMAIL_HOST": "smtp.example.com",
        "EMAIL_PORT": "587",
        "EMAIL_HOST_USER": "kagent",
        "EMAIL_HOST_PASSWORD": "smtp secret",
        "EMAIL_USE_TLS": "true",
        "DEFAULT_FROM_EMAIL": "K-Agent <kagent@example.com>",
        "KAGENT_PUBLIC_URL": "https://kagent.example.com/",
    }
    result = probe(env)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got == {
        **env,
        "EMAIL_PORT": 587,
        "EMAIL_USE_TLS": True,
        "EMAIL_USE_SSL": False,
        "KAGENT_PUBLIC_URL": "https://kagent.example.com",
    }


def test_a_public_url_is_an_origin_and_tls_is_one_kind():
    for url in (
        "kagent.example.com",
        "https://kagent.example.com/dashboard",
        "ftp://x.example",
        "https://u:p@x.example",
    ):
        result = probe({"KAGENT_PUBLIC_URL": url})
        assert result.returncode != 0 and "KAGENT_PUBLIC_URL" in result.stderr, url
    result = probe({"EMAIL_USE_TLS": "true", "EMAIL_USE_SSL": "true"})
    assert result.returncode != 0 and "EMAIL_USE_TLS" in result.stderr
