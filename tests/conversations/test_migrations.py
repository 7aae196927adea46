"""The conversation's move out of `runs` (conversations/migrations/0001, desk 0002, runs 0018) is by state only: a
database migrated by the main of before keeps its tables, rows and constraints, and the conversations app reads and
writes them; the run and the desk still point at them."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from conversations.models import EndUser, Message, Segment, Session, SessionEvent
from desk.models import Handoff
from runs.models import Run
from tests.migrations import migrate, migrate_to_the_latest, schema

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("conversations", None)]  # unapplied, and so are desk 0002 and runs 0018: the models are `runs`' own
BEFORE_STATE = [("runs", "0017_quoted_tool_call_steps"), ("desk", "0001_initial")]
TABLES = ("runs_enduser", "runs_session", "runs_segment", "runs_message", "runs_sessionevent", "runs_run")


def test_a_conversation_made_before_the_move_is_the_conversations_apps_after_it(alice):
    from agents.services import agent_create

    agent = agent_create(project=alice.project, name="A")
    after = schema(TABLES)
    apps = migrate(BEFORE, BEFORE_STATE)
    try:
        assert schema(TABLES) == after  # nothing to undo either: no SQL either way
        project = alice.project.pk
        end_user = apps.get_model("runs", "EndUser").objects.create(project_id=project, external_id="cust-42")
        session = apps.get_model("runs", "Session").objects.create(
            project_id=project, agent_id=agent.pk, end_user=end_user, status="handed_off"
        )
        segment = apps.get_model("runs", "Segment").objects.create(session=session, number=1, tool_set=["a"])
        run = apps.get_model("runs", "Run").objects.create(
            project_id=project, agent_id=agent.pk, session=session, end_user=end_user, segment=segment, input="hi"
        )
        message = apps.get_model("runs", "Message").objects.create(
            project_id=project, session=session, run=run, role="user", content="hi"
        )
        event = apps.get_model("runs", "SessionEvent").objects.create(session=session, type="session.updated")
        handoff = apps.get_model("desk", "Handoff").objects.create(
            project_id=project, session=session, end_user=end_user, reason_type="complaint", summary="s"
        )

        migrate_to_the_latest()
        assert schema(TABLES) == after
        assert EndUser.objects.get(pk=end_user.pk).external_id == "cust-42"
        moved = Session.objects.get(pk=session.pk)
        assert (moved.status, moved.end_user_id) == ("handed_off", end_user.pk)
        assert Segment.objects.get(pk=segment.pk).tool_set == ["a"]
        assert Message.objects.get(pk=message.pk).run_id == run.pk
        assert SessionEvent.objects.get(pk=event.pk).session_id == session.pk
        assert Run.objects.get(pk=run.pk).session == moved  # the run points at the conversations app's session
        assert Handoff.objects.get(pk=handoff.pk).session == moved  # and so does the desk
        assert list(moved.messages.values_list("pk", flat=True)) == [message.pk]
        with pytest.raises(IntegrityError), transaction.atomic():  # the constraint is the one made by `runs`
            EndUser.objects.create(project=alice.project, external_id="cust-42")
    finally:
        migrate_to_the_latest()
