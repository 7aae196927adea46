""" "Forgot your password?" by email (issue 27, item 1): the same answer whether the address has an account or not, a
link that works once and for an hour, throttled per client address and per email address. The request only queues
the mail (issue 39, finding 7: the same work whatever the address); the task, run here as a worker would run the
message the request put on the real queue, looks the accounts up and sends it."""

from __future__ import annotations

import base64
import json
import re
import uuid

import pytest
import redis
from django.conf import settings
from django.core import mail
from django.db import connection
from django.test import Client, TestCase
from django.test.utils import CaptureQueriesContext

from kagent import throttle
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
NEW = "a brand new passphrase 7"


@pytest.fixture(autouse=True)
def fresh_counters(settings):
    # Counters of this test's own: every test client asks from 127.0.0.1.
    settings.CACHES = {name: {**config, "KEY_PREFIX": uuid.uuid4().hex} for name, config in settings.CACHES.items()}


@pytest.fixture(autouse=True)
def own_queue(celery_queue):
    return celery_queue


def queued() -> list[tuple[str, list]]:
    """The tasks the requests put on this test's queue, taken off it: (name, args)."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    found = []
    while (raw := client.rpop(settings.CELERY_TASK_DEFAULT_QUEUE)) is not None:
        message = json.loads(raw)
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        found.append((message["headers"]["task"], args))
    return found


def run_queued() -> None:
    """What a worker does with the queued messages: runs each task."""
    import dashboard.tasks  # noqa: F401  # what a worker has imported
    from kagent.celery import app

    for name, args in queued():
        app.tasks[name](*args)


def ask(client: Client, email: str, address: str = "203.0.113.5", *, deliver: bool = True):
    with TestCase.captureOnCommitCallbacks(execute=True):  # the request's transaction commits: its task is queued
        response = client.post("/password-reset/", {"email": email}, REMOTE_ADDR=address, follow=True)
    if deliver:
        run_queued()
    return response


def page(response) -> str:
    """The page without its CSRF token (one of every visitor's own)."""
    return re.sub(r'"X-CSRFToken": "[^"]*"', "", response.content.decode())


def link_in(message) -> str:
    links = re.findall(r"https?://[^/\s]+(/\S*)", message.body)
    assert len(links) == 1, message.body
    return links[0]


def test_the_sign_in_page_links_to_it(db):
    body = Client().get("/login/").content.decode()
    assert 'href="/password-reset/"' in body and "Forgot your password?" in body


def test_a_reset_link_by_mail_sets_a_new_password_once(alice: Tenant):
    client = Client()
    response = ask(client, "Alice@Example.com")
    assert response.redirect_chain[-1][0] == "/password-reset/sent/"
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["alice@example.com"]
    message = mail.outbox[0]
    assert message.subject == "Your K-Agent password"
    path = link_in(message)
    assert "http://testserver/password-reset/" in message.body and path not in response.content.decode()
    opened = client.get(path)
    assert opened.status_code == 302 and opened["Location"].endswith("/set-password/")  # the token leaves the URL
    form = client.get(opened["Location"])
    assert form.status_code == 200 and "Set password" in form.content.decode()
    done = client.post(opened["Location"], {"new_password1": NEW, "new_password2": NEW})
    assert done.status_code == 302 and done["Location"] == "/agents/"
    assert client.get("/agents/").status_code == 200  # signed in
    alice.user.refresh_from_db()
    assert alice.user.check_password(NEW)
    # Used: the link is bound to the password it replaced.
    again = Client().get(path)
    assert again.status_code == 404 and "no longer valid" in again.content.decode()


def test_the_answer_is_the_same_for_an_address_without_an_account(alice: Tenant):
    known = ask(Client(), "alice@example.com")
    unknown = ask(Client(), "nobody@example.com")
    assert known.status_code == unknown.status_code == 200
    assert known.redirect_chain == unknown.redirect_chain
    assert page(known) == page(unknown)
    assert [message.to for message in mail.outbox] == [["alice@example.com"]]


def test_a_link_that_is_not_ours_or_is_too_old_is_a_404(alice: Tenant, settings):
    ask(Client(), "alice@example.com")
    path = link_in(mail.outbox[0])
    assert Client().get(path.replace(path.split("/")[3], "x" * 20)).status_code == 404
    settings.PASSWORD_RESET_TIMEOUT = -1  # every link is too old
    assert Client().get(path).status_code == 404
    alice.user.refresh_from_db()
    assert alice.user.check_password(PASSWORD)


def test_one_inbox_gets_few_links_and_the_answer_does_not_change(alice: Tenant, monkeypatch):
    monkeypatch.setattr(throttle, "RESET_MAILS_PER_ACCOUNT", 2)
    answers = {page(ask(Client(), "alice@example.com", address=f"198.51.100.{n}")) for n in range(4)}
    assert len(answers) == 1  # the same page every time
    assert len(mail.outbox) == 2


def test_one_address_asking_too_often_is_told_to_wait_whatever_it_asks_for(alice: Tenant, monkeypatch):
    monkeypatch.setattr(throttle, "RESET_REQUESTS_PER_ADDRESS", 2)
    client = Client()
    ask(client, "nobody@example.com")
    ask(client, "someone@example.com")
    for email in ("alice@example.com", "nobody2@example.com"):
        refused = ask(client, email)
        assert refused.redirect_chain == [] and "Too many reset links asked from here" in refused.content.decode()
    assert mail.outbox == []
    assert len(ask(Client(), "alice@example.com", address="192.0.2.1").redirect_chain) == 1  # elsewhere: fine
    assert len(mail.outbox) == 1


def test_an_ipv6_client_is_counted_by_its_64(alice: Tenant, monkeypatch):
    monkeypatch.setattr(throttle, "RESET_REQUESTS_PER_ADDRESS", 1)
    ask(Client(), "nobody@example.com", address="2001:db8:1:2::1")
    refused = ask(Client(), "alice@example.com", address="2001:db8:1:2::ffff")  # a new address of the same block
    assert "Too many reset links asked from here" in refused.content.decode() and mail.outbox == []


def test_the_request_does_the_same_work_for_an_address_with_or_without_an_account(alice: Tenant):
    # What the request's time could tell: the same statements, no lookup of the account, no mail sent in it.
    with CaptureQueriesContext(connection) as known_queries:
        ask(Client(), "alice@example.com", deliver=False)
    with CaptureQueriesContext(connection) as unknown_queries:
        ask(Client(), "nobody@example.com", deliver=False)
    assert [q["sql"] for q in known_queries] == [q["sql"] for q in unknown_queries]
    assert not any("auth_user" in q["sql"] or "kagent_user" in q["sql"] for q in known_queries)
    assert mail.outbox == []
    tasks = queued()
    assert [name for name, _ in tasks] == ["dashboard.password_reset_mail"] * 2
    import dashboard.tasks  # noqa: F401  # what a worker has imported
    from kagent.celery import app

    for name, args in tasks:
        app.tasks[name](*args)
    assert [message.to for message in mail.outbox] == [["alice@example.com"]]  # the task tells them apart
