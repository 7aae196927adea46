"""The registry of providers against the agent config's JSON Schema: agents/ must not import runs/, so the two lists
of provider names are held together here."""

from __future__ import annotations

from agents.config import AGENT_CONFIG_SCHEMA
from runs.providers import PROVIDERS


def test_the_registry_serves_exactly_the_providers_an_agent_config_may_name() -> None:
    # A name only in the schema would publish agents whose runs fail with "unknown model provider"; a name only in
    # the registry could never be configured.
    names = AGENT_CONFIG_SCHEMA["properties"]["model"]["properties"]["provider"]["enum"]

    assert sorted(PROVIDERS) == sorted(names)
