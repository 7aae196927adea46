"""The ASGI application, for the server that streams run events (`uvicorn kagent.asgi:application`): an event
stream waits on Redis without holding a thread. The rest of the API is served by the WSGI application
(kagent/wsgi.py, gunicorn); the TLS proxy in front sends `/v1/runs/*/events` and `/v1/sessions/*/events` here
(docker-compose.yml).

Django's ASGI handler reads a request's whole body (into a temporary file) before any middleware or view runs, so
before the API key is looked at; under WSGI nothing reads it until a view asks (after authentication), and Django
holds it to DATA_UPLOAD_MAX_MEMORY_SIZE then. `BodyLimit` holds the ASGI handler's read to the same size: a body
declared larger is refused before a byte of it is read, one without a length once it has sent that much."""

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.asgi import get_asgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kagent.settings")

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

TOO_LARGE = b'{"error": {"code": "request_too_large", "message": "The request body is too large.", "details": null}}'


class _BodyTooLarge(Exception):
    pass


class BodyLimit:
    """At most DATA_UPLOAD_MAX_MEMORY_SIZE bytes of a request's body are read; over it, 413 `request_too_large`."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if scope["type"] != "http" or limit is None:
            return await self.app(scope, receive, send)
        declared = next((value for name, value in scope["headers"] if name.lower() == b"content-length"), None)
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            return await _refuse(send)
        read = 0

        async def bounded() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > limit:
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, bounded, send)
        except _BodyTooLarge:  # raised while Django's handler reads the body: nothing was answered yet
            await _refuse(send)


async def _refuse(send: Send) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(TOO_LARGE)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": TOO_LARGE})


application = BodyLimit(get_asgi_application())
get_resolver().url_patterns  # noqa: B018 - imported now, not by the first request (kagent/wsgi.py)
