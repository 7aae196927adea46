"""The Python client's tests: `clients/python` is importable from a checkout (as `pip install clients/python` would
make it), and the client talks to a real K-Agent server (`live_server`) with a real Celery worker."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CLIENT_SOURCE = Path(__file__).resolve().parents[2] / "clients" / "python"
if str(CLIENT_SOURCE) not in sys.path:
    sys.path.insert(0, str(CLIENT_SOURCE))

from kagent_client import Client  # noqa: E402

from tests.client.loopback import Loopback  # noqa: E402
from tests.runs.test_run_events_live import asgi_server  # noqa: E402, F401  # uvicorn serving kagent.asgi


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    server = Loopback().start()
    yield server
    server.stop()


@pytest.fixture
def client_for(live_server: Any) -> Iterator[Any]:
    """`client_for(key)`: a Client of the live server with that key."""
    made: list[Client] = []

    def make(key: str, **options: Any) -> Client:
        client = Client(api_key=key, base_url=live_server.url, **options)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
