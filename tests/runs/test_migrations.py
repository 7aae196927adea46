"""Migrations that move data: run against the real schema, from the migration before to the one that moves it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE, AFTER = ("runs", "0008_run_followed_until"), ("runs", "0009_message_unverified_claims")


def migrate(target):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])
    return executor.loader.project_state([target]).apps


def test_assistant_messages_take_their_runs_unverified_claims(alice):
    from agents.services import agent_create

    agent = agent_create(project=alice.project, name="A")
    apps = migrate(BEFORE)
    try:
        run_model, message_model = apps.get_model("runs", "Run"), apps.get_model("runs", "Message")
        outputs = {
            "unconfirmed": {"text": "TKT-99 is open.", "unverified_claims": ["ticket TKT-99"]},
            "confirmed": {"text": "TKT-1 is open.", "unverified_claims": [], "claims": []},
            "no output": None,
        }
        made = {}
        for name, output in outputs.items():
            run = run_model.objects.create(
                project_id=alice.project.pk, agent_id=agent.pk, input="hi", rate_key="x", output=output
            )
            made[name] = [
                message_model.objects.create(project_id=alice.project.pk, run_id=run.pk, role=role, content=name).pk
                for role in ("user", "assistant")
            ]
        apps = migrate(AFTER)
        message_model = apps.get_model("runs", "Message")
        claims = {pk: message_model.objects.get(pk=pk).unverified_claims for pks in made.values() for pk in pks}
        assert [claims[pk] for pk in made["unconfirmed"]] == [[], ["ticket TKT-99"]]
        assert [claims[pk] for pk in made["confirmed"] + made["no output"]] == [[], [], [], []]
    finally:
        migrate(
            ("runs", sorted(n for a, n in MigrationExecutor(connection).loader.graph.leaf_nodes() if a == "runs")[-1])
        )


def test_conversations_with_the_team_already_get_their_times():
    """runs 0013: a session handed off before the live handoff existed is with the team since its open handoff."""
    from datetime import timedelta

    from django.utils import timezone

    from agents.services import agent_create
    from tests.conftest import make_tenant

    tenant = make_tenant("alice")
    agent = agent_create(project=tenant.project, name="A")
    before, after = ("runs", "0012_run_output_events"), ("runs", "0013_live_handoff")
    apps = migrate(before)
    try:
        session_model, handoff_model = apps.get_model("runs", "Session"), apps.get_model("desk", "Handoff")
        handed = session_model.objects.create(project_id=tenant.project.pk, agent_id=agent.pk, status="handed_off")
        opened = timezone.now() - timedelta(hours=2)
        handoff_model.objects.create(
            project_id=tenant.project.pk, session_id=handed.pk, reason_type="x", summary="y", created_at=opened
        )
        other = session_model.objects.create(project_id=tenant.project.pk, agent_id=agent.pk, status="open")
        apps = migrate(after)
        session_model = apps.get_model("runs", "Session")
        moved = session_model.objects.get(pk=handed.pk)
        assert moved.handed_off_at == opened and moved.waiting_since == opened
        assert session_model.objects.get(pk=other.pk).handed_off_at is None
    finally:
        migrate(
            ("runs", sorted(n for a, n in MigrationExecutor(connection).loader.graph.leaf_nodes() if a == "runs")[-1])
        )
