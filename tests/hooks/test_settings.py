"""The retry schedule comes from the environment; a schedule that can't be read stops the service with a clear
message instead of retrying on something else."""

from __future__ import annotations

import json

import pytest

from tests.kagent.test_settings import probe


@pytest.mark.parametrize("value", ["soon", "10,-5", "10,," + "1," * 40, "99999999"])
def test_a_bad_retry_schedule_is_refused_at_start(value):
    result = probe({"DEBUG": "true", "KAGENT_WEBHOOK_RETRY_SECONDS": value})
    assert result.returncode != 0
    assert "KAGENT_WEBHOOK_RETRY_SECONDS is comma-separated seconds" in result.stderr


def test_a_schedule_of_its_own():
    result = probe({"DEBUG": "true", "KAGENT_WEBHOOK_RETRY_SECONDS": "1, 2.5,60"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["debug"] is True
