"""Run events as a client receives them, while the run happens: a real Celery worker runs it, and the stream comes
from a real server, in both forms: uvicorn serving kagent.asgi (production's streaming server) and the threaded WSGI
server (`bin/run`, gunicorn). Read with httpx, event by event."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.llm import Fault, calls, text
from runs.models import Run
from tests.conftest import database_url_for_subprocess, make_tenant, wait_for
from tests.runs.test_lifecycle import CART

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
HANDOFF = ("transfer_to_human", {"reason_type": "complaint", "summary": "Parcel arrived damaged"})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def asgi_server(celery_queue: str, tmp_path: Path) -> Iterator[str]:
    """`uvicorn kagent.asgi:application` on this test's database and queue."""
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_subprocess(),
        "KAGENT_CELERY_QUEUE": celery_queue,
        "DEBUG": "false",
    }
    log = open(tmp_path / "uvicorn.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "kagent.asgi:application", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        if proc.poll() is not None:
            raise RuntimeError((tmp_path / "uvicorn.log").read_text())
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_for(answers, timeout=60, message="uvicorn to answer")
    yield url
    proc.terminate()
    proc.wait(timeout=20)
    log.close()


def receive(response: httpx.Response, on_event: Any = None) -> list[dict[str, Any]]:
    """Events as they arrive (`on_event(event)` is called for each on arrival)."""
    assert response.status_code == 200, response.read()
    assert response.headers["content-type"].startswith("text/event-stream")
    got: list[dict[str, Any]] = []
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line:
            if not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
            continue
        if "event" in fields:
            event = {"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])}
            got.append(event)
            if on_event is not None:
                on_event(event)
        fields = {}
    return got


def publish(api: Any, script: str, tools: dict[str, Any] | None = None) -> str:
    config: dict[str, Any] = {"model": {"provider": "openai_compatible", "name": f"script:{script}"}}
    if tools:
        config["tools"] = tools
    agent = api.post("/v1/agents", {"name": script, "config": config}, format="json").json()["id"]
    assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
    return str(agent)


def test_stream_true_through_uvicorn_shows_the_run_as_it_happens(asgi_server, start_worker, fake_llm):
    tenant = make_tenant("alice")
    # The model takes a moment on each turn: every event must arrive while the run is still going.
    slow = [Fault(delay_s=0.6)]
    fake_llm.script("live", [calls(HANDOFF, faults=slow), text("Someone from our team will take over.", faults=slow)])
    agent = publish(tenant.client(), "live")
    start_worker(fake_llm.worker_env())

    run_ids: list[str] = []
    status_on_arrival: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        if event["event"] == "run.queued":
            run_ids.append(event["data"]["id"])
        else:
            status_on_arrival.append(Run.objects.get(pk=run_ids[0]).status)

    headers = {"Authorization": f"Bearer {tenant.secret_key}"}
    body = {"agent": agent, "input": "my parcel is broken", "stream": True}
    with httpx.stream("POST", f"{asgi_server}/v1/runs", json=body, headers=headers, timeout=60) as response:
        got = receive(response, on_event)
    assert [e["event"] for e in got] == [
        "run.queued",
        "run.in_progress",
        "run.step.created",
        "run.step.created",
        "run.step.created",
        "run.output.delta",
        "run.completed",
    ]
    assert got[-1]["data"]["output"]["text"] == "Someone from our team will take over."
    # Each event reached the client while the run went on: in progress, the model's step, the handoff's step (the
    # model's last step and the end are written together).
    assert status_on_arrival[:3] == [Run.Status.IN_PROGRESS] * 3, status_on_arrival


def test_a_browser_follows_a_paused_run_through_the_wsgi_server(live_server, start_worker, fake_llm):
    tenant = make_tenant("alice")
    fake_llm.script("live-pause", [calls(("get_cart", {})), text("Two items in your cart.")])
    agent = publish(tenant.client(), "live-pause", {"client": [CART]})
    start_worker(fake_llm.worker_env())
    browser = httpx.Client(
        base_url=live_server.url, headers={"Authorization": f"Bearer {tenant.publishable_key}"}, timeout=60
    )
    session = browser.post("/v1/sessions", json={"agent": agent}).json()["id"]
    run = browser.post("/v1/runs", json={"agent": agent, "session": session, "input": "cart?"}).json()

    with browser.stream("GET", f"/v1/runs/{run['id']}/events") as response:
        first = receive(response)  # open before the worker got to it; ends at the pause
    assert [e["event"] for e in first][-1] == "run.requires_action"
    [call] = first[-1]["data"]["required_action"]["tool_calls"]

    # The next stream is open, waiting, when the app answers: what follows arrives on it.
    rest: list[dict[str, Any]] = []
    opened = threading.Event()

    def follow() -> None:
        headers = {"Last-Event-ID": str(first[-1]["id"])}
        with browser.stream("GET", f"/v1/runs/{run['id']}/events", headers=headers) as response:
            opened.set()
            rest.extend(receive(response))

    reader = threading.Thread(target=follow)
    reader.start()
    assert opened.wait(30)
    answer = {"tool_outputs": [{"call_id": call["call_id"], "output": {"items": 2}}]}
    assert browser.post(f"/v1/runs/{run['id']}/submit_tool_outputs", json=answer).status_code == 200
    reader.join(60)
    assert not reader.is_alive()
    assert [e["event"] for e in rest] == [
        "run.step.created",
        "run.queued",
        "run.in_progress",
        "run.step.created",
        "run.output.delta",
        "run.completed",
    ]
    assert rest[-1]["data"]["output"]["text"] == "Two items in your cart."
    browser.close()


def test_get_events_through_uvicorn_arrive_while_the_run_waits(asgi_server):
    # No worker: the run stays queued. Its first event must arrive at once and the stream stay open (served as a
    # stream by the events server, not gathered until it ends); a cancel then ends it.
    tenant = make_tenant("alice")
    api = tenant.client()
    agent = publish(api, "never-driven")
    run = api.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json").json()["id"]
    headers = {"Authorization": f"Bearer {tenant.secret_key}"}
    arrived: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        arrived.append(event["event"])
        if event["event"] == "run.queued":
            assert api.post(f"/v1/runs/{run}/cancel", {}, format="json").status_code == 200

    with httpx.stream("GET", f"{asgi_server}/v1/runs/{run}/events", headers=headers, timeout=20) as response:
        got = receive(response, on_event)
    assert [e["event"] for e in got] == arrived == ["run.queued", "run.cancelled"]
