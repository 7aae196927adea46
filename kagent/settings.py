"""Settings, all read from the environment (SPEC §2).

PostgreSQL and Redis always: with DATABASE_URL / REDIS_URL unset, the embedded servers under var/ (kagent/embedded.py).
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from kagent import embedded

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("KAGENT_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")


def _env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = _env_bool("DEBUG", False)


def _secret_key() -> str:
    key = os.environ.get("SECRET_KEY", "").strip()
    if key:
        return key
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is false")
    # Development: one random key per checkout, kept under var/ so sessions survive restarts.
    VAR_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = VAR_DIR / "secret_key"
    try:  # created private, never readable by others even for a moment
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "localhost,127.0.0.1")
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", "")


def _encryption_keys() -> list[str]:
    keys = _env_list("KAGENT_ENCRYPTION_KEYS", "")
    for key in keys:
        try:
            raw = base64.urlsafe_b64decode(key.encode())
        except ValueError as exc:
            raise ImproperlyConfigured("KAGENT_ENCRYPTION_KEYS holds a key that is not url-safe base64") from exc
        if len(raw) != 32:
            raise ImproperlyConfigured("KAGENT_ENCRYPTION_KEYS keys must be 32 bytes (Fernet.generate_key())")
    if keys:
        return keys
    if not DEBUG:
        raise ImproperlyConfigured("KAGENT_ENCRYPTION_KEYS must be set when DEBUG is false")
    # Development only: derive a stable key from SECRET_KEY.
    derived = hashlib.sha256(b"kagent-encryption:" + SECRET_KEY.encode()).digest()
    return [base64.urlsafe_b64encode(derived).decode()]


KAGENT_ENCRYPTION_KEYS = _encryption_keys()

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "kagent.apps.KagentConfig",
    "agents.apps.AgentsConfig",
    "tools.apps.ToolsConfig",
    "hooks.apps.HooksConfig",
    "conversations.apps.ConversationsConfig",
    "runs.apps.RunsConfig",
    "desk.apps.DeskConfig",
    "checks.apps.ChecksConfig",
    "dashboard.apps.DashboardConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "kagent.cors.CorsMiddleware",
    "kagent.errors.ApiErrorMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "kagent.urls"
WSGI_APPLICATION = "kagent.wsgi.application"
AUTH_USER_MODEL = "kagent.User"
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/agents/"
LOGOUT_REDIRECT_URL = "/login/"
APPEND_SLASH = True

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.context.current_project",
            ],
        },
    }
]

# --- Database, broker and cache: PostgreSQL and Redis, everywhere ----------------------------------
# Unset, they are the embedded servers under var/ (kagent/embedded.py), which `bin/run` and the tests start: the same
# engine and broker as production, on unix sockets.
DATABASE_URL = os.environ.get("DATABASE_URL", "").strip() or embedded.database_url(VAR_DIR / "postgres")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_health_checks=True)}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("DATABASE_URL must be a PostgreSQL URL (postgres://…); K-Agent runs on PostgreSQL only")
# Connections come from a pool per process (Django's, psycopg_pool) and go back to it at the end of every request and
# task, and while a run waits on the model or a tool (runs/lease.py): a worker holding hundreds of runs in flight
# needs only as many connections as run a statement at once. Each checkout is checked (CONN_HEALTH_CHECKS: an empty
# statement's round trip, psycopg_pool's check_connection), so a connection the database dropped while it waited in
# the pool (a restart, an idle timeout) is replaced, never handed to a request or a run. A checkout waits at most 5 s:
# with the database out of reach a request answers 503 then (kagent/errors.py), not after the pool's 30 s default.
KAGENT_DB_POOL_SIZE = int(os.environ.get("KAGENT_DB_POOL_SIZE", "16"))
DATABASES["default"]["OPTIONS"] = {
    **DATABASES["default"].get("OPTIONS", {}),
    "pool": {"min_size": 1, "max_size": KAGENT_DB_POOL_SIZE, "timeout": 5, "max_idle": 300},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "").strip() or embedded.redis_url(VAR_DIR / "redis")
if urlsplit(REDIS_URL).scheme not in ("redis", "rediss", "unix"):
    raise ImproperlyConfigured("REDIS_URL must be a Redis URL (redis://, rediss:// or unix://)")


def _celery_broker_url(redis_url: str) -> str:
    """The same server in kombu's spelling: a unix socket is `<transport>+socket://<path>?virtual_host=<db>` to it
    (the transport named by the alias kagent/celery.py registers)."""
    parts = urlsplit(redis_url)
    if parts.scheme != "unix":
        return redis_url
    db = parse_qs(parts.query).get("db", ["0"])[0]
    return f"kagent+socket://{parts.path}?virtual_host={db}"


CELERY_BROKER_URL = _celery_broker_url(REDIS_URL)
CELERY_BROKER_TRANSPORT = "kagent"  # kagent.broker.Transport: kombu's Redis transport, one client per channel
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3600}
CACHES = {"default": {"BACKEND": "kagent.cache.RedisCache", "LOCATION": REDIS_URL}}

CELERY_TASK_DEFAULT_QUEUE = os.environ.get("KAGENT_CELERY_QUEUE", "kagent")
# Connections go back to the pool between tasks (kagent/celery.py, as Django does between requests); without this
# Celery's Django fixup would close them for good around every task.
CELERY_DB_REUSE_MAX = 1_000_000_000
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True


# --- Model endpoint of the operator (trusted configuration, not a tenant URL) -------------------
KAGENT_LLM_BASE_URL = os.environ.get("KAGENT_LLM_BASE_URL", "").strip()
KAGENT_LLM_API_KEY = os.environ.get("KAGENT_LLM_API_KEY", "").strip()
KAGENT_LLM_MODEL = os.environ.get("KAGENT_LLM_MODEL", "").strip()
KAGENT_LLM_TIMEOUT_S = float(os.environ.get("KAGENT_LLM_TIMEOUT_S", "60"))
# The model names an agent may ask for on the operator's endpoint (the operator pays for them), comma-separated; a
# name ending in * allows every name it starts. Empty: KAGENT_LLM_MODEL only (an agent then names no model).
KAGENT_OPERATOR_MODELS = [
    name.strip() for name in os.environ.get("KAGENT_OPERATOR_MODELS", "").split(",") if name.strip()
]

# --- Egress (the hardened outbound client) -------------------------------------------------------
# Test-only: CIDRs exempt from the deny list, an extra CA bundle, curl-style --resolve entries.
KAGENT_EGRESS_ALLOW_NETWORKS = [n for n in os.environ.get("KAGENT_EGRESS_ALLOW_NETWORKS", "").replace(",", " ").split()]
KAGENT_EGRESS_CA_BUNDLE = os.environ.get("KAGENT_EGRESS_CA_BUNDLE", "").strip()
KAGENT_EGRESS_RESOLVE = os.environ.get("KAGENT_EGRESS_RESOLVE", "").strip()
# The service's own hosts: never reachable through the outbound client.
# Default: the names this service answers to (ALLOWED_HOSTS); list its addresses too in production.
KAGENT_OWN_HOSTS = [
    item.strip()
    for item in (
        os.environ.get("KAGENT_OWN_HOSTS", "").strip()  # set but empty (as compose passes it) means the default
        or ",".join(h.lstrip(".") for h in ALLOWED_HOSTS if h != "*" and h.lstrip("."))
    ).split(",")
    if item.strip()
]

# --- Who is calling, and how often they may ------------------------------------------------------
# Proxies (CIDRs) whose X-Forwarded-For is believed: the client's address is the first one, from the right, that
# isn't one of them. Empty (the default): REMOTE_ADDR is the client, and X-Forwarded-For is ignored.
KAGENT_TRUSTED_PROXIES = [n for n in os.environ.get("KAGENT_TRUSTED_PROXIES", "").replace(",", " ").split()]
# API requests per API key per minute (a project can set its own); run creation per publishable key per minute
# (each run spends on the model); dashboard sign-in failures allowed per account and per address in 15 minutes.
# A publishable key's limits are each visitor's (client address), under a ceiling for the key of that many times
# them (all its visitors together): one visitor can't use up what the others of the site have.
KAGENT_API_RATE_SECRET = int(os.environ.get("KAGENT_API_RATE_SECRET", "1200"))
KAGENT_API_RATE_PUBLISHABLE = int(os.environ.get("KAGENT_API_RATE_PUBLISHABLE", "300"))
KAGENT_RUN_RATE_PUBLISHABLE = int(os.environ.get("KAGENT_RUN_RATE_PUBLISHABLE", "60"))
# The most a project may raise its own limits to (its managers set them in the dashboard).
KAGENT_MAX_API_RATE_SECRET = int(os.environ.get("KAGENT_MAX_API_RATE_SECRET", "12000"))
KAGENT_MAX_API_RATE_PUBLISHABLE = int(os.environ.get("KAGENT_MAX_API_RATE_PUBLISHABLE", "3000"))
KAGENT_MAX_RUN_RATE_PUBLISHABLE = int(os.environ.get("KAGENT_MAX_RUN_RATE_PUBLISHABLE", "600"))
KAGENT_PUBLISHABLE_CEILING_FACTOR = int(os.environ.get("KAGENT_PUBLISHABLE_CEILING_FACTOR", "20"))
KAGENT_SIGNIN_FAILURES = int(os.environ.get("KAGENT_SIGNIN_FAILURES", "10"))
KAGENT_SIGNIN_ACCOUNT_FAILURES = int(os.environ.get("KAGENT_SIGNIN_ACCOUNT_FAILURES", "100"))
# API requests with an Authorization header that names no usable key, per client address per minute; more are 429.
KAGENT_AUTH_FAILURES = int(os.environ.get("KAGENT_AUTH_FAILURES", "30"))
if KAGENT_PUBLISHABLE_CEILING_FACTOR < 1 or KAGENT_AUTH_FAILURES < 1:
    raise ImproperlyConfigured("KAGENT_PUBLISHABLE_CEILING_FACTOR and KAGENT_AUTH_FAILURES are at least 1")
# What one member may do a minute in a project's dashboard that reaches outside or spends on the model.
KAGENT_DASHBOARD_ACTIONS = int(os.environ.get("KAGENT_DASHBOARD_ACTIONS", "60"))
# Run event streams (`GET /v1/runs/{id}/events`) an API key may hold open at once, and `POST /v1/runs` waits.
KAGENT_STREAMS_PER_KEY = int(os.environ.get("KAGENT_STREAMS_PER_KEY", "20"))
KAGENT_WAITS_PER_KEY = int(os.environ.get("KAGENT_WAITS_PER_KEY", "10"))
# Threads of one WSGI process that may wait on runs at once (waits, streams served there); half of gunicorn's
# --threads (Dockerfile), so the rest of the API always has threads. The ASGI server's streams hold no thread.
KAGENT_WAIT_THREADS = int(os.environ.get("KAGENT_WAIT_THREADS", "8"))

# --- i18n, static ----------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
# The chat widget at the site's root (`/widget.js`, `/widget.css`): the one URL a business pastes, cached briefly.
WHITENOISE_ROOT = BASE_DIR / "dashboard" / "widget"

# Served over HTTPS (in production, behind a TLS-terminating proxy): on unless DEBUG is; `bin/run` (DEBUG=true, plain
# http on a laptop) leaves it off, and KAGENT_HTTPS=false serves plain http without DEBUG.
KAGENT_HTTPS = _env_bool("KAGENT_HTTPS", not DEBUG)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = _env_bool("SESSION_COOKIE_SECURE", KAGENT_HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
if KAGENT_HTTPS:
    # Behind the proxy Django sees plain HTTP: the proxy says what the client used (it must set this header, never
    # pass on the client's). Requests that came over HTTPS get HSTS; plain ones (the health check) don't.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = int(os.environ.get("KAGENT_HSTS_SECONDS", "31536000")) if KAGENT_HTTPS else 0
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

# --- Email: invitations and password resets --------------------------------------------------------
# Django's own mail settings, from the environment. Unset: SMTP to localhost:25 (Django's defaults); `bin/run` writes
# each mail to a file under var/mail/ instead (the file backend), and the tests keep them in memory.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "").strip() or "django.core.mail.backends.smtp.EmailBackend"
EMAIL_FILE_PATH = os.environ.get("EMAIL_FILE_PATH", "").strip() or str(VAR_DIR / "mail")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "").strip() or "localhost"
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "").strip() or "25")
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "").strip()
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = _env_bool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS (STARTTLS, port 587) and EMAIL_USE_SSL (port 465): set one of them")
EMAIL_TIMEOUT = 10  # seconds: an invitation is sent while the one who sends it waits for the page
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "").strip() or "K-Agent <noreply@localhost>"


def _public_url() -> str:
    """KAGENT_PUBLIC_URL: the origin links in emails point at, e.g. https://kagent.example.com (no path)."""
    raw = os.environ.get("KAGENT_PUBLIC_URL", "").strip().rstrip("/")
    if not raw:
        return ""
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query or parts.fragment:
        raise ImproperlyConfigured("KAGENT_PUBLIC_URL is an origin like https://kagent.example.com, with no path")
    if parts.username or parts.password:
        raise ImproperlyConfigured("KAGENT_PUBLIC_URL holds no user name or password")
    return raw


# Unset: the origin of the request that sends the mail, its host checked against ALLOWED_HOSTS (dashboard/links.py).
KAGENT_PUBLIC_URL = _public_url()
PASSWORD_RESET_TIMEOUT = 3600  # a reset link works for an hour, and once (it is bound to the password it replaces)
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- REST framework --------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["kagent.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["kagent.auth.SecretKeyRequired"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["kagent.parsers.StrictJSONParser"],
    "EXCEPTION_HANDLER": "kagent.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "kagent.openapi.ApiSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "K-Agent API",
    "DESCRIPTION": "Control plane for customer-service AI agents.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": "/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "OAS_VERSION": "3.1.0",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "kagent.openapi.add_components"],
}

# --- Logging ---------------------------------------------------------------------------------------
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO").upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        # A line per HTTP request, with the full URL (a query string may hold a value): not in the logs.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}

# --- Run engine ------------------------------------------------------------------------------------
# 20 s: with the sweep every 10 s, a dead worker's runs are picked up again within 30 s; a run waiting longer on the
# model or a tool has its lease renewed meanwhile (runs/lease.py), all of a worker's in one statement a tick.
KAGENT_RUN_LEASE_SECONDS = int(os.environ.get("KAGENT_RUN_LEASE_SECONDS", "20"))
KAGENT_SWEEP_SECONDS = float(os.environ.get("KAGENT_SWEEP_SECONDS", "10"))
# An agent's checks run this many at a time (checks/services.py), each in a thread with its own database connection.
KAGENT_CHECK_CONCURRENCY = int(os.environ.get("KAGENT_CHECK_CONCURRENCY", "4"))
# Days kept of webhook events with their delivery logs, and of the egress log; 0 keeps them for good.
KAGENT_WEBHOOK_RETENTION_DAYS = int(os.environ.get("KAGENT_WEBHOOK_RETENTION_DAYS", "30"))
KAGENT_EGRESS_RETENTION_DAYS = int(os.environ.get("KAGENT_EGRESS_RETENTION_DAYS", "90"))
# A run still queued this long after it was sent is sent again (its message was lost with the broker); a second
# message is harmless, the claim lets one worker through.
KAGENT_RUN_RESEND_SECONDS = int(os.environ.get("KAGENT_RUN_RESEND_SECONDS", "300"))
# Sooner when the run's message is no longer waiting on the broker's queue (a worker took it and was killed before
# its claim, or Redis restarted empty): the sweeper reads the queue to tell.
KAGENT_RUN_RESEND_MISSING_SECONDS = int(os.environ.get("KAGENT_RUN_RESEND_MISSING_SECONDS", "30"))


# --- Webhooks ----------------------------------------------------------------------------------------
# Seconds before each automatic retry of a failed delivery (network error, timeout, 408, 429, 5xx), each with ±20%
# jitter: ten attempts over about a day. A delivery that used them all up with no success on its endpoint since
# disables the endpoint.
def _retry_seconds(name: str, default: str) -> list[float]:
    try:
        values = [float(item) for item in _env_list(name, default)]
    except ValueError:
        values = [-1.0]
    if len(values) > 30 or any(not 0 <= value <= 7 * 86400 for value in values):
        raise ImproperlyConfigured(f"{name} is comma-separated seconds (0 to 604800 each, at most 30 of them)")
    return values


KAGENT_WEBHOOK_RETRY_SECONDS = _retry_seconds(
    "KAGENT_WEBHOOK_RETRY_SECONDS", "10,60,300,1800,3600,7200,14400,28800,28800"
)
# How long a worker holds a delivery it is sending; a worker that died mid-delivery lets it go after this.
KAGENT_WEBHOOK_LEASE_SECONDS = float(os.environ.get("KAGENT_WEBHOOK_LEASE_SECONDS", "60"))
CELERY_BEAT_SCHEDULE = {
    "runs-sweep": {"task": "runs.sweep", "schedule": KAGENT_SWEEP_SECONDS},
    # Check runs whose process died end as failed.
    "checks-sweep": {"task": "checks.sweep", "schedule": KAGENT_SWEEP_SECONDS},
    # Webhook events not dispatched and deliveries due or let go by a dead worker are queued again.
    "hooks-sweep": {"task": "hooks.sweep", "schedule": KAGENT_SWEEP_SECONDS},
    # API knowledge sources whose refresh_minutes have passed are fetched again.
    "knowledge-refresh": {"task": "agents.knowledge_refresh_due", "schedule": 60.0},
    # Webhook events done with, and egress log rows, older than their retention are deleted, a bounded number a pass.
    "hooks-expire": {"task": "hooks.expire", "schedule": 600.0},
    "egress-expire": {"task": "kagent.egress_expire", "schedule": 600.0},
}
