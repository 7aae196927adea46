"""Checks run through the engine: the run tests' harness (an agent published with a scripted model, runs over the
API, the engine in this process)."""

from tests.runs.conftest import h, no_backoff_sleep  # noqa: F401
