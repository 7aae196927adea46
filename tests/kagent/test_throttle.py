"""Request limits: per API key (secret and publishable separately, the project's own or the defaults; a publishable
key's per visitor address, under a ceiling for the key), run creation per publishable key (the same way), and
dashboard sign-in per account and per address — 429 `rate_limited` with Retry-After, or the same message on the
sign-in page whether the account exists or not."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from fakes.llm import text
from kagent.models import Project
from tests.kagent.test_auth import error
from tests.runs.conftest import Harness

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_counters(settings):
    # Counters of this test's own: a namespace no other test process (sharing the Redis database) writes to.
    settings.CACHES = {name: {**config, "KEY_PREFIX": uuid.uuid4().hex} for name, config in settings.CACHES.items()}
    yield


def test_a_secret_key_over_its_projects_limit_gets_429_with_retry_after(alice, bob):
    Project.objects.filter(pk=alice.project.pk).update(api_rate_secret=3)
    api = alice.client()
    assert [api.get("/v1/agents").status_code for _ in range(3)] == [200, 200, 200]
    refused = api.get("/v1/agents")
    assert refused.status_code == 429 and error(refused) == "rate_limited"
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["error"]["details"]["retry_after"] == int(refused["Retry-After"])
    # the hot endpoint, served outside DRF's request cycle, counts against the same limit
    hot = api.post("/v1/runs", {"agent": "agt_0", "input": "x"}, format="json")
    assert hot.status_code == 429 and error(hot) == "rate_limited" and hot["Retry-After"]
    # another project's key, and the same project's publishable key, have their own counts
    assert bob.client().get("/v1/agents").status_code == 200
    assert alice.client(alice.publishable_key).get("/v1/sessions").status_code == 200


def test_publishable_keys_have_their_own_limit(alice, settings):
    settings.KAGENT_API_RATE_PUBLISHABLE = 2
    browser = alice.client(alice.publishable_key)
    codes = [browser.get("/v1/runs/run_00000000000000000000000000").status_code for _ in range(3)]
    assert codes == [404, 404, 429]
    assert alice.client().get("/v1/agents").status_code == 200  # the secret key is not held by it


def test_run_creation_per_publishable_key(alice, fake_llm, settings):
    settings.KAGENT_RUN_RATE_PUBLISHABLE = 2
    h = Harness(alice, fake_llm)
    agent = h.agent("spend", [text("hi")])
    browser = h.tenant.client(h.tenant.publishable_key)
    made = [browser.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json") for _ in range(3)]
    assert [r.status_code for r in made] == [201, 201, 429]
    assert error(made[2]) == "rate_limited"
    # the business's server (secret key) starts runs without that limit
    assert h.api.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json").status_code == 201


def sign_in(client: Client, email: str, password: str, address: str = "203.0.113.5"):
    return client.post("/login/", {"username": email, "password": password}, REMOTE_ADDR=address)


def test_sign_in_is_throttled_per_account_and_address_with_one_message_for_every_account(alice, settings):
    settings.KAGENT_SIGNIN_FAILURES = 3
    client = Client()
    for _ in range(3):
        assert "Please enter a correct" in sign_in(client, alice.user.email, "wrong").content.decode()
    # from that address the right password no longer gets in for a while, and it says only to wait
    page = sign_in(client, alice.user.email, "correct horse battery").content.decode()
    assert "Too many failed sign-ins" in page
    assert "_auth_user_id" not in client.session
    # the owner, elsewhere, is not locked out by someone else's guesses (second review, item 9)
    assert sign_in(Client(), alice.user.email, "correct horse battery", address="198.51.100.7").status_code == 302
    # an account that doesn't exist reads the same
    for _ in range(3):
        sign_in(client, "nobody@example.com", "wrong", address="198.51.100.8")
    assert (
        "Too many failed sign-ins"
        in sign_in(client, "nobody@example.com", "x", address="198.51.100.8").content.decode()
    )


def test_guesses_from_many_addresses_meet_the_accounts_own_ceiling(alice, settings):
    settings.KAGENT_SIGNIN_FAILURES = 3
    settings.KAGENT_SIGNIN_ACCOUNT_FAILURES = 5
    client = Client()
    for n in range(5):
        sign_in(client, alice.user.email, "wrong", address=f"198.51.100.{n + 1}")  # under each address's limit
    page = sign_in(client, alice.user.email, "correct horse battery", address="192.0.2.99").content.decode()
    assert "Too many failed sign-ins" in page


def test_sign_in_is_throttled_per_address(alice, bob, settings):
    settings.KAGENT_SIGNIN_FAILURES = 3
    client = Client()
    for n in range(3):
        sign_in(client, f"guess{n}@example.com", "wrong")  # one address trying many accounts
    page = sign_in(client, bob.user.email, "correct horse battery").content.decode()
    assert "Too many failed sign-ins" in page
    other_address = sign_in(client, bob.user.email, "correct horse battery", address="192.0.2.44")
    assert other_address.status_code == 302  # signed in from elsewhere


def test_a_successful_sign_in_starts_the_account_count_over(alice, settings):
    settings.KAGENT_SIGNIN_FAILURES = 3
    client = Client()
    for _ in range(2):
        sign_in(client, alice.user.email, "wrong", address="198.51.100.1")
    assert sign_in(client, alice.user.email, "correct horse battery", address="198.51.100.2").status_code == 302
    client.post("/logout/")
    for _ in range(2):
        sign_in(client, alice.user.email, "wrong", address="198.51.100.3")
    assert sign_in(client, alice.user.email, "correct horse battery", address="198.51.100.4").status_code == 302


def test_owners_and_admins_set_their_projects_limits_on_the_api_keys_page(alice, bob):
    owner = Client()
    owner.force_login(alice.user)
    page = owner.get("/settings/api-keys/").content.decode()
    assert "Request limits" in page and "(default)" in page
    response = owner.post("/settings/request-limits/", {"api_rate_secret": "5", "run_rate_publishable": "7"})
    assert response.status_code == 302
    project = Project.objects.get(pk=alice.project.pk)
    assert (project.api_rate_secret, project.api_rate_publishable, project.run_rate_publishable) == (5, None, 7)
    refused = owner.post("/settings/request-limits/", {"api_rate_secret": "0"})
    assert refused.status_code == 200 and "greater than or equal to 1" in refused.content.decode()

    from kagent.models import Membership, User

    member = User.objects.create_user("member@example.com", "correct horse battery")
    Membership.objects.create(organization=alice.organization, user=member, role=Membership.Role.MEMBER)
    looker = Client()
    looker.force_login(member)
    assert looker.post("/settings/request-limits/", {"api_rate_secret": "100000"}).status_code == 403
    assert Project.objects.get(pk=alice.project.pk).api_rate_secret == 5


def test_a_count_ends_with_its_window(alice):
    # Counted with one round trip in Redis: the counter is made with its expiry, so a window's count never outlives
    # it (a counter left without one would refuse the key for good once it reached the limit).

    from django.core.cache import caches

    from kagent import throttle
    from kagent.cache import RedisCache

    counts = [throttle.count("expiry-test", limit=2, window_s=60) for _ in range(3)]
    assert counts[:2] == [None, None] and 1 <= counts[2] <= 60
    assert throttle.peek("expiry-test", window_s=60) == 3
    backend = caches["default"]
    assert isinstance(backend, RedisCache)  # the tests run on Redis, as production does
    key, _ = throttle._window("expiry-test", 60, throttle.time.time())  # the limits' own clock (tests/conftest.py)
    assert 0 < backend._cache.get_client(write=True).ttl(backend.make_and_validate_key(key)) <= 65


def test_a_project_can_not_raise_its_limits_above_the_operators_ceilings(alice, settings):
    """Second security review, item 8: a manager could set a million requests a minute per key."""
    settings.KAGENT_MAX_API_RATE_SECRET = 5000
    owner = Client()
    owner.force_login(alice.user)
    refused = owner.post("/settings/request-limits/", {"api_rate_secret": "1000000"})
    assert refused.status_code == 200 and "At most 5000 a minute on this service." in refused.content.decode()
    assert Project.objects.get(pk=alice.project.pk).api_rate_secret is None

    from kagent.errors import Unprocessable
    from kagent.services import project_limits_update

    with pytest.raises(Unprocessable) as too_high:
        project_limits_update(
            project=alice.project, api_rate_secret=None, api_rate_publishable=None, run_rate_publishable=10_000
        )
    assert too_high.value.code == "limit_too_high"
    assert owner.post("/settings/request-limits/", {"api_rate_secret": "5000"}).status_code == 302


# --- a publishable key: per visitor, under a key-wide ceiling (issue 27, finding 4) --------------------------------


def visitor(tenant, address: str):
    """A visitor of the business's site: the page's publishable key, from the visitor's own address."""
    client = tenant.client(tenant.publishable_key)
    client.defaults["REMOTE_ADDR"] = address
    return client


NOWHERE = "/v1/runs/run_00000000000000000000000000"


def test_one_visitor_over_the_request_limit_does_not_silence_the_others(alice, settings):
    settings.KAGENT_API_RATE_PUBLISHABLE = 3
    noisy, quiet = visitor(alice, "198.51.100.7"), visitor(alice, "203.0.113.9")
    assert [noisy.get(NOWHERE).status_code for _ in range(8)] == [404] * 3 + [429] * 5
    refused = noisy.get(NOWHERE)
    assert error(refused) == "rate_limited" and refused["Retry-After"]
    assert "address" in refused.json()["error"]["message"]
    assert [quiet.get(NOWHERE).status_code for _ in range(3)] == [404] * 3
    # a project's own limit is per visitor too
    Project.objects.filter(pk=alice.project.pk).update(api_rate_publishable=5)
    assert [visitor(alice, "192.0.2.30").get(NOWHERE).status_code for _ in range(6)] == [404] * 5 + [429]


def test_one_visitor_over_the_run_limit_does_not_stop_the_others_runs(alice, fake_llm, settings):
    settings.KAGENT_RUN_RATE_PUBLISHABLE = 2
    h = Harness(alice, fake_llm)
    agent = h.agent("visitors-spend", [text("hi")])
    noisy, quiet = visitor(alice, "198.51.100.7"), visitor(alice, "203.0.113.9")
    made = [noisy.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json") for _ in range(4)]
    assert [r.status_code for r in made] == [201, 201, 429, 429]
    assert "address" in made[2].json()["error"]["message"]
    assert quiet.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json").status_code == 201


def test_the_key_wide_ceiling_still_holds_and_refused_requests_dont_fill_it(alice, settings):
    settings.KAGENT_API_RATE_PUBLISHABLE = 2
    settings.KAGENT_PUBLISHABLE_CEILING_FACTOR = 2  # the key: 4 requests a minute, all visitors together
    first, second, third = (visitor(alice, f"203.0.113.{n}") for n in (11, 12, 13))
    # the first visitor's refused requests are its own: they don't count against the key
    assert [first.get(NOWHERE).status_code for _ in range(6)] == [404, 404, 429, 429, 429, 429]
    assert [second.get(NOWHERE).status_code for _ in range(2)] == [404, 404]
    over = third.get(NOWHERE)
    assert over.status_code == 429 and error(over) == "rate_limited" and over["Retry-After"]
    assert "visitors" in over.json()["error"]["message"]
    # the business's server is not held by its publishable key's ceiling
    assert alice.client().get("/v1/agents").status_code == 200


def test_the_key_wide_run_ceiling_holds(alice, fake_llm, settings):
    settings.KAGENT_RUN_RATE_PUBLISHABLE = 1
    settings.KAGENT_PUBLISHABLE_CEILING_FACTOR = 2
    h = Harness(alice, fake_llm)
    agent = h.agent("visitors-ceiling", [text("hi")])
    codes = [
        visitor(alice, f"198.51.100.{n}").post("/v1/runs", {"agent": agent, "input": "hi"}, format="json").status_code
        for n in (1, 2, 3)
    ]
    assert codes == [201, 201, 429]


def test_a_visitors_messages_to_the_team_are_limited_per_visitor(alice, fake_llm, settings):
    settings.KAGENT_RUN_RATE_PUBLISHABLE = 2
    h = Harness(alice, fake_llm)
    agent = h.agent("visitors-messages", [text("hi")])

    def write(client, session: str) -> int:
        body = {"role": "user", "content": "still there?"}
        return int(client.post(f"/v1/sessions/{session}/messages", body, format="json").status_code)

    noisy, quiet = visitor(alice, "198.51.100.7"), visitor(alice, "203.0.113.9")
    mine = noisy.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    theirs = quiet.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    assert [write(noisy, mine) for _ in range(3)] == [201, 201, 429]
    assert write(quiet, theirs) == 201


def test_a_secret_key_keeps_one_count_whatever_the_address(alice):
    Project.objects.filter(pk=alice.project.pk).update(api_rate_secret=2)
    api = alice.client()
    codes = [api.get("/v1/agents", REMOTE_ADDR=f"192.0.2.{n}").status_code for n in (1, 2, 3)]
    assert codes == [200, 200, 429]
