"""A new run's two statements, each one round trip (the reasons for SQL by hand: runs/store.py): what it runs (the
agent's latest published version, read with the agent in one query) and its row with its `run.queued` event."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import JSONField

from agents.models import Agent, AgentVersion
from kagent.sql import execute, json_text, jsonb_loaded
from runs.models import Run, RunEvent

_LATEST_VERSION_SQL = """
SELECT agent.actions_paused, agent.traffic, version.id, version.number, version.config, version.http_tools,
    version.mcp_tools,
    EXISTS (
        SELECT 1 FROM agents_knowledgesource AS source
        WHERE source.project_id = agent.project_id AND source.searchable
            AND (source.agent_id = agent.id OR source.agent_id IS NULL)
    )
FROM agents_agent AS agent
JOIN agents_agentversion AS version ON version.agent_id = agent.id AND version.number = agent.latest_version_number
WHERE agent.id = %(agent)s AND agent.project_id = %(project)s AND agent.deleted_at IS NULL
"""

LatestVersion = tuple[Agent, AgentVersion, bool]


def latest_version(*, project_id: str, agent_id: str) -> tuple[Agent, AgentVersion, bool] | None:
    """The agent with its latest published version, and whether it has searchable knowledge (the rule of
    `agents.selectors.searchable_sources`, which a test keeps equal), in one query; None when the agent isn't there
    or has no version."""
    rows = execute(_LATEST_VERSION_SQL, {"agent": agent_id, "project": project_id})
    if not rows:
        return None
    return _latest_from_row(project_id, agent_id, rows[0])


def _latest_from_row(project_id: str, agent_id: str, row: Sequence[Any]) -> LatestVersion:
    actions_paused, traffic, version_id, number, config, http_tools, mcp_tools, has_knowledge = row
    agent = Agent(
        id=agent_id,
        project_id=project_id,
        actions_paused=actions_paused,
        latest_version_number=number,
        traffic=jsonb_loaded(traffic),
    )
    version = AgentVersion(
        id=version_id,
        project_id=project_id,
        agent=agent,
        number=number,
        config=jsonb_loaded(config),
        http_tools=jsonb_loaded(http_tools),
        mcp_tools=jsonb_loaded(mcp_tools),
    )
    for made in (agent, version):
        made._state.adding = False
    return agent, version, bool(has_knowledge)


_RUN_FIELDS = tuple(Run._meta.concrete_fields)
_INSERT_RUN_SQL = (
    f"WITH created AS (INSERT INTO {Run._meta.db_table} ({', '.join(f.column for f in _RUN_FIELDS)}) "
    f"VALUES ({', '.join('%s' for _ in _RUN_FIELDS)}) RETURNING id) "
    "INSERT INTO runs_runevent (run_id, type, ref, created_at) SELECT id, %s, '', now() FROM created"
)


# What each column is sent as: a JSON column as its JSON text (PostgreSQL reads it as the column's jsonb; None stays
# SQL NULL, as JSONField saves it), every other column as its value (already of the column's Python type on a Run
# made by `_new_run`). Field by field, Django's `get_db_prep_save` cost more than the rest of the INSERT's client side.
_RUN_VALUES = tuple((f.attname, isinstance(f, JSONField)) for f in _RUN_FIELDS)


def _db_value(value: Any, is_json: bool) -> Any:
    return json_text(value) if is_json and value is not None else value


def insert_run(run: Run) -> None:
    """A new run's row and its `run.queued` event (one statement: a one-shot run is made without a transaction
    around it). No stream is woken: nobody outside this request knows the run's id yet, and a stream or a wait this
    request opens (`"stream": true`, `wait`) reads the events after it subscribed."""
    values = [_db_value(getattr(run, name), is_json) for name, is_json in _RUN_VALUES]
    execute(_INSERT_RUN_SQL, [*values, RunEvent.Type.QUEUED])
    run._state.adding = False
