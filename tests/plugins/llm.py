"""Pytest fixtures for the scripted model server. Registered from tests/conftest.py:

    pytest_plugins = ["tests.plugins.llm"]

- `fake_llm`: the operator's model (plain http on 127.0.0.1, one server per session). Sets KAGENT_LLM_BASE_URL,
  KAGENT_LLM_API_KEY and KAGENT_LLM_MODEL for the test; `fake_llm.worker_env()` gives the same to a Celery worker.
- `fake_llm_tls`: the same fake over HTTPS at https://llm.test:8443 on a loopback address other than 127.0.0.1, for
  what must go through the hardened client (anthropic, tenant base_urls). Sets the test-only egress settings of
  SPEC §2 to allow exactly that address and trust the test CA; 127.0.0.1 stays refused.

Both are reset (scripts, fault counters, recorded requests) before each test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.llm import FakeLLM, bind_tls, tls_context, write_tls_files

TLS_SERVER_NAME = "llm.test"
OPERATOR_API_KEY = "fake-operator-key"
OPERATOR_MODEL = "fake-model"


@pytest.fixture(scope="session")
def fake_llm_server() -> Iterator[FakeLLM]:
    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture
def fake_llm(fake_llm_server: FakeLLM, settings: Any) -> Iterator[FakeLLM]:
    """The scripted operator model, set as KAGENT_LLM_BASE_URL for this test."""
    fake_llm_server.reset()
    settings.KAGENT_LLM_BASE_URL = fake_llm_server.base_url
    settings.KAGENT_LLM_API_KEY = OPERATOR_API_KEY
    settings.KAGENT_LLM_MODEL = OPERATOR_MODEL
    yield fake_llm_server
    fake_llm_server.reset()


@pytest.fixture(scope="session")
def fake_llm_tls_ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return write_tls_files(tmp_path_factory.mktemp("fake-llm-tls"), TLS_SERVER_NAME)


@pytest.fixture(scope="session")
def fake_llm_tls_server(fake_llm_tls_ca: tuple[Path, Path, Path]) -> Iterator[FakeLLM]:
    _, cert_path, key_path = fake_llm_tls_ca
    server = bind_tls(ssl_context=tls_context(cert_path, key_path), server_name=TLS_SERVER_NAME)
    yield server
    server.stop()


@pytest.fixture
def fake_llm_tls(
    fake_llm_tls_server: FakeLLM, fake_llm_tls_ca: tuple[Path, Path, Path], settings: Any
) -> Iterator[FakeLLM]:
    """The scripted model at https://llm.test:8443, reachable through the hardened client for this test only."""
    ca_path = fake_llm_tls_ca[0]
    fake_llm_tls_server.reset()
    settings.KAGENT_EGRESS_ALLOW_NETWORKS = [f"{fake_llm_tls_server.host}/32"]
    settings.KAGENT_EGRESS_CA_BUNDLE = str(ca_path)
    settings.KAGENT_EGRESS_RESOLVE = f"{TLS_SERVER_NAME}:8443:{fake_llm_tls_server.host}"
    yield fake_llm_tls_server
    fake_llm_tls_server.reset()
