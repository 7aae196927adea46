"""Loading the application readies it for requests."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# A module of each part of the URLconf, and the runs API's views.
REACHED = ("kagent.api_urls", "runs.apis.create", "agents.urls", "tools.urls", "hooks.urls", "dashboard.urls")


@pytest.mark.parametrize("module", ["kagent.wsgi", "kagent.asgi"])
def test_loading_the_application_imports_what_a_request_reaches(module):
    """The first request each server worker serves doesn't import the URLconf, its views and their schemas (about
    half a second of CPU, measured): loading the application does, before the worker takes requests."""
    code = f"import sys, {module}; print(' '.join(m for m in {REACHED!r} if m not in sys.modules))"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "kagent.settings"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ""
