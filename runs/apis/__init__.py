"""`/v1/runs…` (a conversation's `/v1/sessions…`: conversations/apis.py; the desk's `/v1/tickets…`, `/v1/handoffs…`:
desk/apis.py). Each operation parses its body, calls one service or selector, renders. Publishable keys may create
runs and use their own. A run made and listed: `create.py`; read, followed and its steps: `reads.py`; answered
(tool outputs, approvals) or cancelled: `actions.py`."""

from __future__ import annotations

from typing import Any

from kagent.models import ApiKey
from runs import lifecycle
from runs.models import Run
from runs.resources import RUN, for_browser


def deliver(run: Run, key: ApiKey) -> dict[str, Any]:
    """The run as the caller sees it (a browser: `last_error` in neutral words); a `store: false` run's content is
    deleted once its result was returned."""
    rendered = RUN.render(run) if key.is_secret else for_browser(RUN.render(run))
    if not run.store and run.status in Run.TERMINAL and run.purged_at is None:
        lifecycle.run_purge(run=run)
    return rendered
