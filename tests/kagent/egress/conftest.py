"""`client` here is the hardened outbound client (elsewhere it is Django's test client). The servers and settings
fixtures are in tests/plugins/egress.py, a plugin shared with the run tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kagent.egress import EgressClient


@pytest.fixture
def client() -> Iterator[EgressClient]:
    egress = EgressClient()
    yield egress
    egress.close()
