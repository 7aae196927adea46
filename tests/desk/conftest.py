"""The desk's tests drive runs as tests/runs does: its harness `h` (agents published with a scripted model, runs
started over the API and driven by the engine in this process), without the providers' retry pauses."""

from __future__ import annotations

from tests.runs.conftest import h, no_backoff_sleep  # noqa: F401  (fixtures, found here by pytest)
