"""`wait` on POST /v1/runs under the production web server (gunicorn with gunicorn.conf.py): a waiting request holds
one thread, never a process; waits beyond a key's allowance or this process's waiting threads answer at once (201
with Retry-After) instead of queueing behind each other; the rest of the API keeps answering meanwhile; a wait ends
when the run's events say it settled."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.llm import text
from kagent import pubsub
from kagent.models import ApiKey
from tests.conftest import database_url_for_subprocess, make_tenant, wait_for
from tests.runs.test_run_events_live import _free_port, publish

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def gunicorn(celery_queue: str, tmp_path: Path) -> Iterator[Callable[..., str]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(**env: str) -> str:
        port = _free_port()
        environment = {
            **os.environ,
            "DATABASE_URL": database_url_for_subprocess(),
            "KAGENT_CELERY_QUEUE": celery_queue,
            "DEBUG": "false",
            "KAGENT_BIND": f"127.0.0.1:{port}",
            "WEB_CONCURRENCY": "1",
            **env,
        }
        log_path = tmp_path / f"gunicorn-{port}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "kagent.wsgi", "-c", "gunicorn.conf.py"],
            cwd=ROOT,
            env=environment,
            stdout=log_path.open("wb"),
            stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"

        def answers() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(log_path.read_text())
            try:
                return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(answers, timeout=60, message="gunicorn to answer")
        return url

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=30)


def post_run(url: str, key: str, agent: str, **body: Any) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/runs",
        json={"agent": agent, "input": "hi", **body},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )


def test_waits_never_take_the_api_from_everyone_else(gunicorn):
    # One process with 4 threads, 2 of which may wait: the shape of production's 16 and 8, smaller.
    url = gunicorn(WEB_THREADS="4", KAGENT_WAIT_THREADS="2", KAGENT_WAITS_PER_KEY="10")
    alice, bob = make_tenant("alice"), make_tenant("bob")
    agent = publish(alice.client(), "never-driven")  # no worker: its runs stay queued, so waits run their course
    answers: list[tuple[float, httpx.Response]] = []

    def waiter() -> None:
        response = post_run(url, alice.publishable_key, agent, wait=8)
        answers.append((time.monotonic(), response))

    waiters = [threading.Thread(target=waiter) for _ in range(5)]
    for thread in waiters:
        thread.start()
    # Two of the five hold the process's waiting threads; the other three answer at once, without waiting.
    wait_for(lambda: len(answers) >= 3, timeout=20, message="the surplus waits to answer")
    for _, response in answers[:3]:
        assert response.status_code == 201 and response.headers["Retry-After"] == "1"
        assert response.json()["status"] == "queued"
    # Another tenant's requests are answered while the two waits go on.
    other = httpx.get(f"{url}/v1/agents", headers={"Authorization": f"Bearer {bob.secret_key}"}, timeout=20)
    assert other.status_code == 200
    assert len(answers) == 3, "the two waits were still waiting when bob was answered"
    for thread in waiters:
        thread.join(30)
    waited = [response for _, response in answers[3:]]
    assert [r.status_code for r in waited] == [201, 201]  # they waited their 8 s; the run never settled
    assert all(r.headers["Retry-After"] == "1" for r in waited)


def test_a_key_has_its_own_allowance_of_waits(gunicorn, settings):
    url = gunicorn(WEB_THREADS="8", KAGENT_WAIT_THREADS="6", KAGENT_WAITS_PER_KEY="1")
    alice = make_tenant("alice")
    agent = publish(alice.client(), "never-driven")
    first: list[httpx.Response] = []
    holder = threading.Thread(target=lambda: first.append(post_run(url, alice.publishable_key, agent, wait=6)))
    holder.start()
    key = ApiKey.objects.get(digest=ApiKey.digest_of(alice.publishable_key))
    waits = pubsub.redis_client()
    wait_for(lambda: waits.zcard(f"kagent:waits:key:{key.pk}:127.0.0.1") == 1, message="the first wait to begin")
    second = post_run(url, alice.publishable_key, agent, wait=6)
    assert second.status_code == 201 and second.headers["Retry-After"] == "1"
    assert holder.is_alive(), "the key's one wait was still going when the second answered"
    # The secret key is another key: its wait is its own.
    secret = post_run(url, alice.secret_key, agent, wait=1)
    assert secret.status_code == 201
    holder.join(30)
    assert first[0].status_code == 201


def test_a_wait_ends_when_the_run_settles(gunicorn, start_worker, fake_llm):
    url = gunicorn()
    alice = make_tenant("alice")
    fake_llm.script("settles", [text("hello")])
    agent = publish(alice.client(), "settles")
    start_worker(fake_llm.worker_env())
    response = post_run(url, alice.secret_key, agent, wait=30)
    assert response.status_code == 200
    assert response.json()["status"] == "completed" and response.json()["output"]["text"] == "hello"
    assert "Retry-After" not in response.headers
