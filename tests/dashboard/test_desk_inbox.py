"""The desk's inbox and a conversation's page (SPEC §4 "Live handoff", §8) through Django's test client: the
conversations the team holds, the longest-waiting customer first; the thread and its event stream; Send reply, Hand
back to agent and Close conversation with the API's services and messages; another project's conversation is a
404 on every one of them, and a form post needs its CSRF token. In a real browser: test_desk_browser.py."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.services import agent_create, agent_publish
from conversations import services as conversation
from conversations.identity import EndUserClaim
from conversations.models import Message, Session, SessionEvent
from conversations.services import panel_session_create, session_create
from desk.models import Handoff
from fakes.llm import calls, text
from kagent import streams
from runs import engine
from runs.services import run_create
from tests.conftest import Tenant
from tests.dashboard.test_pages import signed_in
from tests.runs.test_run_events import read

pytestmark = pytest.mark.django_db

HANDOFF = ("transfer_to_human", {"reason_type": "complaint", "summary": "Parcel arrived damaged"})
TRANSFERRED = "A person from our team will continue here."


def handed_off(tenant: Tenant, fake_llm: Any, *, customer: str | None = "cust-42", script: str = "desk") -> Session:
    """A customer's conversation the agent handed to the team (`transfer_to_human`), as a run of the scripted model
    leaves it."""
    fake_llm.script(script, [calls(HANDOFF), text(TRANSFERRED)])
    model = {"provider": "openai_compatible", "name": f"script:{script}"}
    agent = agent_create(project=tenant.project, name=f"Front desk {script}", config={"model": model})
    agent_publish(agent=agent, note="")
    claim = EndUserClaim(external_id=customer) if customer else None
    session = session_create(project=tenant.project, api_key=None, agent_id=agent.pk, end_user=claim)
    run = run_create(
        project=tenant.project,
        api_key=None,
        agent_id=agent.pk,
        text="My parcel arrived broken, I want a person",
        session_id=session.pk,
        end_user=claim,
    )
    engine.run_execute(run.pk)
    session.refresh_from_db()
    assert session.status == Session.Status.HANDED_OFF
    return session


def inbox_rows(body: str) -> list[str]:
    """The inbox's conversations as the desk lists them, each one's text without its markup."""
    inbox = body.split('id="inbox"', 1)[1].split("</ul>", 1)[0]
    return [" ".join(re.sub(r"<[^>]+>", " ", row).split()) for row in inbox.split("<li>")[1:]]


def test_the_inbox_lists_the_conversations_with_the_team_the_longest_waiting_first(alice, bob, fake_llm):
    waiting = handed_off(alice, fake_llm, customer="cust-42", script="waiting")
    longest = handed_off(alice, fake_llm, customer=None, script="longest")
    answered = handed_off(alice, fake_llm, customer="cust-7", script="answered")
    conversation.session_message_create(session=answered, role="team", content="Looking into it now.", author="Sam")
    conversation.session_message_create(session=longest, role="user", content="Hello? Anyone there?")
    Session.objects.filter(pk=longest.pk).update(waiting_since=timezone.now() - timedelta(hours=2, minutes=5))
    back_with_the_agent = handed_off(alice, fake_llm, customer="cust-back", script="back")
    conversation.session_update(session=back_with_the_agent, status="open")
    test_panel = panel_session_create(project=alice.project, agent_id=waiting.agent_id)
    conversation.session_message_create(session=test_panel, role="team", content="A test reply.", author="Sam")
    handed_off(bob, fake_llm, customer="bobs-customer", script="bob")

    body = signed_in(alice).get("/desk/").content.decode()
    rows = inbox_rows(body)
    assert len(rows) == 3, rows
    assert rows[0].startswith("Anonymous visitor waiting 2 hours, 5 minutes")
    assert "Customer: Hello? Anyone there?" in rows[0]
    assert rows[1].startswith("cust-42 waiting under a minute") and f"Agent: {TRANSFERRED}" in rows[1]
    assert rows[2].startswith("cust-7 answered") and "Sam (team): Looking into it now." in rows[2]
    for session in (longest, waiting, answered):
        assert f'href="/sessions/{session.pk}/"' in body
    assert "cust-back" not in body.split('id="inbox"')[1].split("</ul>")[0]  # handed back: the agent has it

    # Test-panel conversations only with the desk's switch, marked as tests.
    with_tests = inbox_rows(signed_in(alice).get("/desk/?include_tests=true").content.decode())
    assert len(with_tests) == 4
    assert [row for row in with_tests if "test" in row.split()] == [with_tests[3]]
    assert "Sam (team): A test reply." in with_tests[3]

    empty = signed_in(bob).get("/desk/?include_tests=true").content.decode()
    assert "bobs-customer" in empty and "cust-42" not in empty and "Anonymous visitor" not in empty


def test_the_inbox_says_when_nobody_waits_and_costs_one_query_however_long(alice, fake_llm):
    client = signed_in(alice)
    assert "No conversation is with the team." in client.get("/desk/").content.decode()

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            client.get("/desk/")
        return len(captured.captured_queries)

    handed_off(alice, fake_llm, script="count-0")
    one = queries()
    for n in (1, 2):
        handed_off(alice, fake_llm, script=f"count-{n}")
    assert queries() == one
    assert len(inbox_rows(client.get("/desk/").content.decode())) == 3


def test_a_conversations_page_shows_the_thread_and_follows_its_events(alice, fake_llm, monkeypatch):
    session = handed_off(alice, fake_llm)
    conversation.session_message_create(session=session, role="user", content="<b>Still</b> broken & waiting")
    client = signed_in(alice)
    body = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Conversation with cust-42" in body
    assert 'data-session-status role="status">handed off<' in body
    assert "&lt;b&gt;Still&lt;/b&gt; broken &amp; waiting" in body and "<b>Still</b>" not in body
    assert TRANSFERRED in body and "My parcel arrived broken" in body
    last = SessionEvent.objects.filter(session_id=session.pk).order_by("-id").first()
    assert last is not None
    assert f'data-session-events="/sessions/{session.pk}/events/" data-last-event="{last.id}"' in body
    for control in ('<label for="f-content">Reply</label>', ">Send reply</button>", ">Hand back to agent</button>"):
        assert control in body
    assert ">Close conversation</button>" in body

    # The stream the page follows: what happened after the event the page was drawn with.
    conversation.session_message_create(session=session, role="user", content="Hello?")
    monkeypatch.setattr(streams, "MAX_WSGI_STREAM_S", 0)  # one look, then the stream ends
    got = read(client.get(f"/sessions/{session.pk}/events/?last_event_id={last.id}"))
    assert [(e["event"], e["data"]["role"], e["data"]["content"]) for e in got] == [
        ("session.message.created", "user", "Hello?")
    ]
    resumed = read(client.get(f"/sessions/{session.pk}/events/", HTTP_LAST_EVENT_ID=str(got[0]["id"])))
    assert resumed == []


def test_send_reply_hand_back_and_close(alice, fake_llm):
    session = handed_off(alice, fake_llm)
    handoff = Handoff.objects.get(session=session)
    alice.user.name = "Sam Jones"
    alice.user.save()
    client = signed_in(alice)
    page = f"/sessions/{session.pk}/"

    # Without JavaScript: a plain post, then the page again with the reply in the thread.
    response = client.post(f"{page}reply/", {"content": "Sorry about that!\r\nA new parcel leaves today."})
    assert response.status_code == 302 and response["Location"] == f"{page}#reply"
    reply = Message.objects.filter(session=session).latest("created_at")
    assert (reply.role, reply.author, reply.content) == ("team", "Sam", "Sorry about that!\nA new parcel leaves today.")
    assert reply.run_id is None
    assert "Sam (team)" in client.get(page).content.decode()
    api = alice.client().get(f"/v1/sessions/{session.pk}/messages").json()["data"]
    assert [(m["role"], m["author"], m["content"]) for m in api if m["id"] == reply.pk] == [
        ("team", "Sam", reply.content)
    ]
    session.refresh_from_db()
    assert session.status == "handed_off" and session.waiting_since is None

    # With htmx: the form again, empty, with the message it sent for the page to add to the thread.
    form = client.post(f"{page}reply/", {"content": "Anything else?"}, HTTP_HX_REQUEST="true").content.decode()
    assert form.strip().startswith('<form method="post"') and "</textarea>" in form
    assert '<script id="reply-sent" type="application/json">' in form and '"content": "Anything else?"' in form
    assert '"status": "handed_off"' in form and '"author": "Sam"' in form

    # Refused as the API refuses it, with its message: next to the field (htmx), or on the page.
    before = Message.objects.count()
    refused = client.post(f"{page}reply/", {"content": "   "}, HTTP_HX_REQUEST="true").content.decode()
    assert 'aria-invalid="true"' in refused and "Write the message first." in refused
    assert "reply-sent" not in refused
    followed = client.post(f"{page}reply/", {"content": "x" * 20_001}, follow=True).content.decode()
    assert "The message can be at most 20,000 characters long" in followed and 'class="error"' in followed
    assert Message.objects.count() == before

    # Hand back to agent: open, its handoff closed; then Close conversation.
    back = client.post(f"{page}status/", {"status": "open"}, follow=True).content.decode()
    assert "Handed back to the agent" in back and 'data-session-status role="status">open<' in back
    session.refresh_from_db()
    handoff.refresh_from_db()
    assert (session.status, handoff.status) == ("open", "closed")
    assert "Replying takes the conversation from the agent" in back
    assert re.search(r'data-when-status="handed_off" hidden>\s*<input[^>]*>\s*<input[^>]*value="open"', back)

    closed = client.post(f"{page}status/", {"status": "closed"}, follow=True).content.decode()
    assert "Conversation closed." in closed and 'data-session-status role="status">closed<' in closed
    assert Session.objects.get(pk=session.pk).status == "closed"
    assert alice.client().get(f"/v1/sessions/{session.pk}").json()["status"] == "closed"

    wrong = client.post(f"{page}status/", {"status": "handed_off"}, follow=True).content.decode()
    assert "status is &quot;open&quot; (hand the conversation back to the agent) or &quot;closed&quot;." in wrong
    assert Session.objects.get(pk=session.pk).status == "closed"


def test_a_reply_is_signed_with_the_members_first_name_else_their_emails_local_part(alice, fake_llm):
    session = handed_off(alice, fake_llm)
    client = signed_in(alice)
    client.post(f"/sessions/{session.pk}/reply/", {"content": "One"})
    alice.user.name = "  Mona   Lisa "
    alice.user.save()
    client.post(f"/sessions/{session.pk}/reply/", {"content": "Two"})
    authors = list(Message.objects.filter(session=session, role="team").order_by("created_at").values_list("author"))
    assert authors == [("alice",), ("Mona",)]


def test_another_projects_conversation_is_a_404_and_changes_nothing(alice, bob, fake_llm):
    session = handed_off(alice, fake_llm)
    before = list(Message.objects.filter(session=session).values_list("pk", flat=True))
    page = f"/sessions/{session.pk}/"
    client = signed_in(bob)
    assert client.get("/desk/").status_code == 200  # picks bob's project
    for path in (page, f"{page}events/"):
        response = client.get(path)
        assert response.status_code == 404 and b"cust-42" not in response.content, path
    for path, data in ((f"{page}reply/", {"content": "Hi from bob"}), (f"{page}status/", {"status": "closed"})):
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            assert client.post(path, data, **headers).status_code == 404, path
    assert list(Message.objects.filter(session=session).values_list("pk", flat=True)) == before
    assert Session.objects.get(pk=session.pk).status == "handed_off"
    # Signed out: to the sign-in page.
    for path in (page, f"{page}events/"):
        response = Client().get(path)
        assert response.status_code == 302 and "/login/" in response["Location"]


def test_the_teams_actions_need_the_pages_csrf_token(alice, fake_llm):
    session = handed_off(alice, fake_llm)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice.user)
    page = f"/sessions/{session.pk}/"
    assert client.post(f"{page}reply/", {"content": "Forged"}).status_code == 403
    assert client.post(f"{page}status/", {"status": "closed"}).status_code == 403
    assert not Message.objects.filter(role="team").exists()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', client.get(page).content.decode())
    assert token is not None
    sent = client.post(f"{page}reply/", {"content": "Real", "csrfmiddlewaretoken": token.group(1)})
    assert sent.status_code == 302 and Message.objects.filter(role="team", content="Real").exists()
