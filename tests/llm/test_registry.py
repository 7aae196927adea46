"""The one registry of providers: the agent config's `model.provider` enum, its message and the dashboard's choices
are read from it, so a provider named anywhere is one the engine can call."""

from __future__ import annotations

import pytest

from agents.config import AGENT_CONFIG_SCHEMA
from agents.config_validation import validate_config
from dashboard.editor import PROVIDERS as DASHBOARD_CHOICES
from kagent.errors import Unprocessable
from llm.providers import PROVIDERS, REGISTRY


def test_the_registry_serves_exactly_the_providers_an_agent_config_may_name() -> None:
    # A name only in the schema would publish agents whose runs fail with "unknown model provider"; a name only in
    # the registry could never be configured.
    names = AGENT_CONFIG_SCHEMA["properties"]["model"]["properties"]["provider"]["enum"]

    assert sorted(PROVIDERS) == sorted(names) == ["anthropic", "demo", "openai_compatible"]


def test_the_dashboard_offers_each_provider_once_with_its_label_and_the_default() -> None:
    assert [name for name, _ in DASHBOARD_CHOICES] == ["", *(entry.name for entry in REGISTRY)]
    assert dict(DASHBOARD_CHOICES)["anthropic"] == "Anthropic (Messages API)"


def test_a_provider_outside_the_registry_is_refused_with_the_names_it_may_be() -> None:
    with pytest.raises(Unprocessable) as refused:
        validate_config({"model": {"provider": "cohere"}})

    assert "openai_compatible, anthropic or demo" in str(refused.value.message)
