"""The ASGI application, for the server that streams run events (`uvicorn kagent.asgi:application`): an event
stream waits on Redis without holding a thread. The rest of the API is served by the WSGI application
(kagent/wsgi.py, gunicorn); the TLS proxy in front sends `/v1/runs/*/events` and `/v1/sessions/*/events` here
(docker-compose.yml)."""

import os

from django.core.asgi import get_asgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kagent.settings")

application = get_asgi_application()
get_resolver().url_patterns  # noqa: B018 - imported now, not by the first request (kagent/wsgi.py)
