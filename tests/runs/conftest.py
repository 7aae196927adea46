"""Helpers for run tests: agents published with a scripted model, runs started over the API and driven by the
engine in this process (the integration tests in test_worker_runs.py use a real Celery worker instead)."""

from __future__ import annotations

from typing import Any

import pytest

from llm import retry
from runs import engine
from runs.models import Run


@pytest.fixture(autouse=True)
def no_backoff_sleep(monkeypatch: Any) -> None:
    # Retries still happen; only the waiting between them is skipped.
    monkeypatch.setattr(retry, "SLEEP", lambda seconds: None)


class Harness:
    def __init__(self, tenant: Any, fake: Any) -> None:
        self.tenant = tenant
        self.api = tenant.client()
        self.fake = fake

    def agent(
        self,
        script: str,
        turns: list[Any] | None = None,
        *,
        tools: dict[str, Any] | None = None,
        publish: bool = True,
        **config: Any,
    ) -> str:
        if turns is not None:
            self.fake.script(script, turns)
        body = {"model": {"provider": "openai_compatible", "name": f"script:{script}"}, **config}
        if tools is not None:
            body["tools"] = tools
        response = self.api.post("/v1/agents", {"name": script, "config": body}, format="json")
        assert response.status_code == 201, response.json()
        agent_id = response.json()["id"]
        if publish:
            assert self.api.post(f"/v1/agents/{agent_id}/publish", {}, format="json").status_code == 201
        return agent_id

    def start(
        self, agent: str, text: str = "hello", *, key: str | None = None, expect: int = 201, **body: Any
    ) -> dict[str, Any]:
        client = self.tenant.client(key) if key else self.api
        response = client.post("/v1/runs", {"agent": agent, "input": text, **body}, format="json")
        assert response.status_code == expect, response.json()
        return response.json()

    def drive(self, run_id: str) -> dict[str, Any]:
        """What a worker does: claim and advance the run."""
        engine.run_execute(run_id)
        return self.get(run_id)

    def run(self, agent: str, text: str = "hello", **body: Any) -> dict[str, Any]:
        return self.drive(self.start(agent, text, **body)["id"])

    def get(self, run_id: str) -> dict[str, Any]:
        return self.api.get(f"/v1/runs/{run_id}").json()

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        return self.api.get(f"/v1/runs/{run_id}/steps").json()["data"]

    def tool_steps(self, run_id: str) -> list[dict[str, Any]]:
        return [s["tool_call"] for s in self.steps(run_id) if s["kind"] == "tool_call"]

    def session(self, agent: str, **body: Any) -> str:
        response = self.api.post("/v1/sessions", {"agent": agent, **body}, format="json")
        assert response.status_code == 201, response.json()
        return response.json()["id"]

    @staticmethod
    def db(run_id: str) -> Run:
        return Run.objects.get(pk=run_id)


@pytest.fixture
def h(alice: Any, fake_llm: Any) -> Harness:
    return Harness(alice, fake_llm)


VERIFIED = {"end_user": {"external_id": "cust-42", "traits": {"tier": "gold"}}}
