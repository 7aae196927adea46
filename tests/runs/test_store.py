"""The hot path's hand-written SQL says what the ORM would: run creation's one-query lookup agrees with the
selectors it stands in for."""

from __future__ import annotations

import importlib

import psycopg
import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from agents.models import KnowledgeSource
from agents.selectors import searchable_sources
from agents.services import agent_create, agent_publish
from conversations import services as conversation
from conversations.models import Message as ChatMessage
from conversations.models import Segment, Session
from desk.models import Handoff, Ticket, TicketCounter
from hooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent
from hooks.services import endpoint_create
from kagent.models import ApiKey, EgressEvent
from kagent.sql import api_key_by_digest
from runs import creation, executors, services
from runs.models import Run, RunEvent, RunStep, ToolCall
from tests.conftest import make_tenant

pytestmark = pytest.mark.django_db


def publish(api, name="a"):
    agent = api.post("/v1/agents", {"name": name}, format="json").json()["id"]
    assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
    return agent


def source(api, **body):
    response = api.post(
        "/v1/knowledge_sources", {"title": "t", "content": "Returns within 30 days.", **body}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def agrees(project_id, agent_id):
    found = creation.latest_version(project_id=project_id, agent_id=agent_id)
    assert found is not None
    expected = searchable_sources(project_id=project_id, agent_id=agent_id).exists()
    assert found[2] is expected
    return expected


def test_latest_version_and_searchable_knowledge_agree_with_the_selectors(alice, bob):
    api = alice.client()
    agent, other = publish(api, "a"), publish(api, "b")
    project = alice.project.pk
    assert agrees(project, agent) is False
    mine = source(api, agent=other)  # another agent's source
    assert agrees(project, agent) is False and agrees(project, other) is True
    KnowledgeSource.objects.filter(pk=mine).update(searchable=False)
    assert agrees(project, other) is False
    source(bob.client(), title="bob's")  # another project's shared source
    assert agrees(project, agent) is False
    source(api)  # the project's shared source
    assert agrees(project, agent) is True and agrees(project, other) is True
    found = creation.latest_version(project_id=project, agent_id=agent)
    assert found is not None and found[1].number == 1 and found[0].pk == agent


def test_latest_version_is_none_for_unpublished_deleted_or_foreign_agents(alice, bob):
    api = alice.client()
    draft = api.post("/v1/agents", {"name": "draft"}, format="json").json()["id"]
    assert creation.latest_version(project_id=alice.project.pk, agent_id=draft) is None
    agent = publish(api)
    assert creation.latest_version(project_id=bob.project.pk, agent_id=agent) is None
    api.delete(f"/v1/agents/{agent}")
    assert creation.latest_version(project_id=alice.project.pk, agent_id=agent) is None


def test_post_runs_reads_its_key_then_its_agent_then_inserts_the_run(alice, bob):
    api = alice.client()
    agent = publish(api)
    api.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json")  # the key's last_used_at, once a minute
    with CaptureQueriesContext(connection) as queries:
        response = api.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json")
    assert response.status_code == 201 and response.json()["version"] == 1
    assert len(queries) == 3, [q["sql"] for q in queries]
    assert ["kagent_apikey" in queries[0]["sql"], "agents_agentversion" in queries[1]["sql"]] == [True, True]
    assert queries[2]["sql"].lstrip().startswith(("INSERT", "WITH")), queries[2]["sql"]
    # Another project's key never reads this project's agent.
    assert bob.client().post("/v1/runs", {"agent": agent, "input": "hi"}, format="json").status_code == 404


def prepared() -> dict[str, int]:
    """This connection's prepared statements in PostgreSQL: statement text → times executed (generic and custom
    plans)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        return dict(cursor.fetchall())


def test_the_hot_path_statements_are_prepared_once_and_then_reused(alice):
    """Django opens psycopg connections with preparation turned off; the hand-written statements are prepared on
    their connection all the same, once, and later runs execute the prepared statement instead of parsing and
    planning the text again."""
    api = alice.client()
    agent = publish(api)
    api.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json")
    before = prepared()
    keys = [sql for sql in before if "FROM kagent_apikey" in sql]
    agents = [sql for sql in before if "FROM agents_agent AS agent" in sql]
    inserts = [sql for sql in before if sql.lstrip().startswith("WITH created AS (INSERT INTO runs_run")]
    assert len(keys) == 1 and len(agents) == 1 and len(inserts) == 1, list(before)
    for _ in range(3):
        assert api.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json").status_code == 201
    after = prepared()
    assert len(after) == len(before)  # nothing prepared again
    for sql in (keys[0], agents[0], inserts[0]):
        assert after[sql] == before[sql] + 3


@pytest.mark.django_db(transaction=True)
def test_a_column_altered_under_a_kept_connection_does_not_break_its_prepared_statements():
    """A deploy that changes the type of a column a prepared statement returns: PostgreSQL refuses the statement
    prepared before ("cached plan must not change result type"); the next request is answered all the same."""
    tenant = make_tenant("alice")
    digest = ApiKey.digest_of(tenant.secret_key)
    assert api_key_by_digest(digest) is not None  # prepared on this connection
    params = {k: v for k, v in connection.get_connection_params().items() if k != "cursor_factory"}
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("ALTER TABLE kagent_apikey ALTER COLUMN hint TYPE text")
        try:
            key = api_key_by_digest(digest)
            assert key is not None and key.project_id == tenant.project.pk
        finally:
            connection.close()
            other.execute("ALTER TABLE kagent_apikey ALTER COLUMN hint TYPE varchar(20)")
    assert api_key_by_digest(digest) is not None  # and back: the pool's connections forget the stale statement too


def test_a_runs_foreign_keys_are_checked_by_the_statement_that_writes_the_row():
    """Django makes every foreign key DEFERRABLE INITIALLY DEFERRED: checked at COMMIT, where PostgreSQL's statistics
    count each check as a statement of its own (15 beside a run's 6). The tables a run writes check theirs in the
    statement: a row referring to nothing fails there, and a later migration that re-creates one of these keys
    deferred (as Django does) fails here."""
    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        # Deferred, this INSERT would pass and only the COMMIT (never reached in a test's transaction) would fail.
        RunEvent.objects.create(run_id="run_00000000000000000000000000", type=RunEvent.Type.QUEUED)
    # The key's own refusal, not another constraint's.
    assert isinstance(refused.value.__cause__, psycopg.errors.ForeignKeyViolation), refused.value
    tables = (
        *importlib.import_module("runs.migrations.0010_foreign_keys_checked_in_statement").RUN_TABLES,
        *importlib.import_module("runs.migrations.0013_live_handoff").TABLES,
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, con.conname, con.condeferrable FROM pg_constraint AS con "
            "JOIN pg_class AS c ON c.oid = con.conrelid "
            "WHERE con.contype = 'f' AND c.relnamespace = current_schema()::regnamespace AND c.relname = ANY(%s)",
            [list(tables)],
        )
        keys = cursor.fetchall()
    assert {table for table, _, _ in keys} == set(tables)  # every table named exists and has its keys
    assert [name for _, name, deferrable in keys if deferrable] == []


def test_a_session_and_a_project_with_all_a_run_writes_are_deleted_whole(alice):
    """With those keys checked in the statement, every deletion must delete the rows that refer to a row before it.
    Django's collector orders them only for keys that can't be null: a nullable key (a message's session, an egress
    row's project) it leaves, on PostgreSQL, to constraints checked at COMMIT. A session, then the project, with a
    run, its events, steps, calls, messages, handoff, ticket, egress row and webhook outbox rows, are deleted whole."""
    agent = agent_create(project=alice.project, name="a")
    agent_publish(agent=agent)
    key = ApiKey.objects.get(project=alice.project, kind=ApiKey.Kind.SECRET)
    session = conversation.session_create(project=alice.project, api_key=key, agent_id=agent.pk)
    run = services.run_create(project=alice.project, api_key=key, agent_id=agent.pk, text="hi", session_id=session.pk)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.IN_PROGRESS, claims=1)
    run = Run.objects.get(pk=run.pk)
    for index, (name, arguments) in enumerate(
        (
            ("create_ticket", {"title": "Broken item", "description": "Arrived broken."}),
            ("transfer_to_human", {"reason_type": "other", "summary": "The customer asks for a person."}),
        )
    ):
        call = ToolCall.objects.create(
            project=alice.project, run=run, round=1, index=index, model_call_id=f"m{index}", name=name, rate_key="r"
        )
        executors.builtin_execute(run=run, call=call, name=name, arguments=arguments, fields={})
    RunStep.objects.create(run=run, kind=RunStep.Kind.MODEL_CALL)
    EgressEvent.objects.create(project=alice.project, purpose="http_tool", method="GET", host="h", decision="allowed")
    endpoint, _ = endpoint_create(
        project=alice.project, url="https://hooks.example.com/in", event_types=["run.completed"]
    )
    event = WebhookEvent.objects.create(project=alice.project, type="run.completed", object_id=run.pk, data={})
    delivery = WebhookDelivery.objects.create(project=alice.project, endpoint=endpoint, event=event)
    WebhookAttempt.objects.create(delivery=delivery, number=1, outcome=WebhookAttempt.Outcome.SUCCEEDED)
    written = (RunEvent, ChatMessage, Handoff, Ticket, TicketCounter, Segment)
    assert all(model.objects.filter(project_id=alice.project.pk).exists() for model in (ChatMessage, Handoff, Ticket))
    assert all(model.objects.exists() for model in written)

    Session.objects.get(pk=session.pk).delete()  # its messages and segments go; the run and the desk's rows stay
    assert not ChatMessage.objects.filter(session_id=session.pk).exists() and Run.objects.filter(pk=run.pk).exists()
    alice.project.delete()
    for model in (*written, Run, RunStep, ToolCall, EgressEvent, WebhookEvent, WebhookDelivery, WebhookAttempt):
        assert not model.objects.exists(), model.__name__
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the keys that are still deferred: checked now
