"""The knowledge page (`/knowledge/`) through Django's test client: text sources split and searched as soon as they
are saved, API sources checked as the API checks them and fetched from the business's HTTPS API (the real TLS fake on
loopback), what each refusal says next to its field, and nothing half-made."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import KnowledgeSource
from agents.services import agent_create, agent_delete
from kagent.models import SigningSecret
from kagent.secrets import signing_secrets_valid
from tests.agents.test_knowledge_api import FAQ, fetch, found, sent  # noqa: F401  (sent: a fixture)
from tests.dashboard.test_pages import errors_on, member_of, signed_in

pytestmark = pytest.mark.django_db

POLICY = "# Returns\n\nItems can be returned within 30 days, with the receipt.\n\n# Shipping\n\nWe ship in 2 days."


def text_form(**changes: Any) -> dict[str, Any]:
    return {"$.title": "Policies", "$.kind": "text", "$.content": POLICY, "$.searchable": "on", **changes}


def api_form(**changes: Any) -> dict[str, Any]:
    return {
        "$.title": "FAQ",
        "$.kind": "api",
        "$.url": "https://tools.test:8443/respond/faq",
        "$.response.items_path": "data.faqs",
        "$.response.fields.path": ["question", "answer", ""],
        "$.response.fields.label": ["Question", "Answer", ""],
        "$.searchable": "on",
        **changes,
    }


def test_a_text_source_is_split_searched_edited_and_deleted_on_the_page(alice):
    client = signed_in(alice)
    assert "No knowledge sources yet" in client.get("/knowledge/").content.decode()

    added = client.post("/knowledge/", text_form())
    source = KnowledgeSource.objects.get()
    assert added.status_code == 302 and added["Location"] == f"/knowledge/{source.pk}/"
    page = client.get(added["Location"]).content.decode()
    assert "Added: 2 passages." in page
    assert page.index("Returns") < page.index("within 30 days") < page.index("Shipping")  # the passages, in order
    listing = client.get("/knowledge/").content.decode()
    assert "Policies" in listing and "every agent" in listing
    assert found(alice.project, "return an item") == ["Items can be returned within 30 days, with the receipt."]

    edited = client.post(
        f"/knowledge/{source.pk}/",
        {"$.title": "Policies", "$.content": "# Returns\n\nReturns are accepted within 14 days."},  # not searchable
    )
    assert edited.status_code == 302
    source.refresh_from_db()
    assert (source.passage_count, source.searchable) == (1, False)
    assert found(alice.project, "return an item") == []  # not searchable: no agent finds it

    client.post(f"/knowledge/{source.pk}/", {"$.title": "Policies", "$.content": source.content, "$.searchable": "on"})
    assert found(alice.project, "return an item") == ["Returns are accepted within 14 days."]

    assert client.post(f"/knowledge/{source.pk}/refresh/").status_code == 302  # a text source is not fetched
    assert "Only api sources are fetched" in client.get(f"/knowledge/{source.pk}/").content.decode()

    client.post(f"/knowledge/{source.pk}/delete/")
    assert KnowledgeSource.objects.count() == 0 and found(alice.project, "return an item") == []


def test_saving_an_unchanged_source_changes_nothing(alice, api):
    client = signed_in(alice)
    client.post("/knowledge/", text_form())
    source = KnowledgeSource.objects.get()
    client.post(f"/knowledge/{source.pk}/", {"$.title": "Policies", "$.content": POLICY, "$.searchable": "on"})
    assert KnowledgeSource.objects.get().updated_at == source.updated_at
    api.patch(f"/v1/knowledge_sources/{source.pk}", {"searchable": True}, format="json")
    assert KnowledgeSource.objects.get().updated_at == source.updated_at


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"$.title": "  "}, "f-title", "Give the source a title"),
        ({"$.content": ""}, "f-content", "Write the content"),
        ({"$.kind": "pdf"}, "f-kind", "kind is text or api"),
        ({"$.agent": "agt_of_nobody"}, "f-agent", "No agent with that id in this project."),
    ],
)
def test_a_text_source_the_api_refuses_is_refused_next_to_its_field(alice, changes, field, message):
    refused = signed_in(alice).post("/knowledge/", text_form(**changes))
    assert refused.status_code == 422
    body = refused.content.decode()
    if field:
        assert message in errors_on(body)[field]
    else:
        assert message in body
    assert KnowledgeSource.objects.count() == 0
    typed = text_form(**changes)  # what was typed stays
    assert f'value="{typed["$.title"]}"' in body and ("within 30 days" in body) == bool(typed["$.content"])


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"$.refresh_minutes": "²"}, "f-refresh_minutes", "from 15 to 10080"),  # a digit int() doesn't read
        ({"$.refresh_minutes": "9" * 5000}, "f-refresh_minutes", "from 15 to 10080"),  # past int()'s 4300 digits
        ({"$.refresh_minutes": "٣٠"}, "", ""),  # Arabic-Indic digits are a number: 30
        ({"$.response.max_items": "¹"}, "f-response-max_items", "response is {items_path"),
    ],
)
def test_a_number_that_isnt_one_is_refused_next_to_its_field(alice, changes, field, message):
    response = signed_in(alice).post("/knowledge/", api_form(**changes))
    if not field:
        assert response.status_code == 302 and KnowledgeSource.objects.get().refresh_minutes == 30
        return
    assert response.status_code == 422
    assert message in errors_on(response.content.decode())[field]
    assert KnowledgeSource.objects.count() == 0


@pytest.mark.parametrize(
    ("form", "changes", "field"),
    [
        (text_form, {"$.title": "Poli\x00cies"}, "f-title"),
        (text_form, {"$.content": "# Returns\n\nWithin\x00 30 days."}, "f-content"),
        (text_form, {"$.agent": "agt_\x00"}, "f-agent"),
        (api_form, {"$.url": "https://tools.test:8443/\x00"}, "f-url"),
        (
            api_form,
            {"$.response.fields.path": ["question\x00"], "$.response.fields.label": ["Question"]},
            "f-response-fields",
        ),
    ],
)
def test_a_nul_character_the_database_cant_hold_is_refused_next_to_its_field(alice, form, changes, field):
    client = signed_in(alice)
    refused = client.post("/knowledge/", form(**changes))
    assert refused.status_code == 422
    assert "NUL character" in errors_on(refused.content.decode())[field]
    assert KnowledgeSource.objects.count() == 0

    if form is text_form and field != "f-agent":  # and on the edit page
        source = KnowledgeSource.objects.get(pk=client.post("/knowledge/", text_form())["Location"].split("/")[2])
        refused = client.post(f"/knowledge/{source.pk}/", text_form(**changes))
        assert refused.status_code == 422 and "NUL character" in errors_on(refused.content.decode())[field]
        source.refresh_from_db()
        assert (source.title, source.content) == ("Policies", POLICY)


def test_another_projects_agent_or_a_deleted_one_is_refused_next_to_searched_by(alice, bob):
    deleted = agent_create(project=alice.project, name="Gone agent")
    agent_delete(agent=deleted)
    for agent in (agent_create(project=bob.project, name="Bob's agent"), deleted):
        refused = signed_in(alice).post("/knowledge/", text_form(**{"$.agent": agent.pk}))
        assert refused.status_code == 422
        body = refused.content.decode()
        assert errors_on(body)["f-agent"] == "No agent with that id in this project."
        assert "Bob's agent" not in body and "Gone agent" not in body  # not among the choices either
    assert KnowledgeSource.objects.count() == 0


def test_a_source_of_a_deleted_agent_says_so_and_links_nowhere(alice):
    gone = agent_create(project=alice.project, name="Gone agent")
    client = signed_in(alice)
    client.post("/knowledge/", text_form(**{"$.agent": gone.pk}))
    source = KnowledgeSource.objects.get()
    agent_delete(agent=gone)
    assert "Gone agent (deleted)" in client.get("/knowledge/").content.decode()
    page = client.get(f"/knowledge/{source.pk}/").content.decode()
    assert "Gone agent (deleted)" in page and f"/agents/{gone.pk}/" not in page  # its page is a 404
    assert client.post(f"/knowledge/{source.pk}/", text_form(**{"$.title": "Old policies"})).status_code == 302


def test_a_source_for_one_agent_is_found_by_that_agent_only(alice):
    shop = agent_create(project=alice.project, name="Shop agent")
    other = agent_create(project=alice.project, name="Other agent")
    signed_in(alice).post("/knowledge/", text_form(**{"$.agent": shop.pk}))
    from agents.selectors import knowledge_search

    def hits(agent):
        return knowledge_search(project_id=alice.project.pk, agent_id=agent.pk, query="return an item")

    assert len(hits(shop)) == 1 and hits(other) == []
    assert "Shop agent" in signed_in(alice).get("/knowledge/").content.decode()


def test_an_api_source_is_checked_like_the_api_then_fetched_and_shown(
    alice,
    upstream,
    egress_settings,
    sent,  # noqa: F811  (the fixture imported above)
    django_capture_on_commit_callbacks,
):
    client = member_of(alice, "member", "writer@example.com")  # like agents and tools: any member
    refused = client.post("/knowledge/", api_form(**{"$.url": "http://tools.test:8443/respond/faq"}))
    assert refused.status_code == 422 and "f-url" in errors_on(refused.content.decode())
    assert 'value="http://tools.test:8443/respond/faq"' in refused.content.decode()
    refused = client.post("/knowledge/", api_form(**{"$.response.fields.path": [""], "$.response.fields.label": [""]}))
    assert refused.status_code == 422 and "f-response-fields" in errors_on(refused.content.decode())
    refused = client.post("/knowledge/", api_form(**{"$.refresh_minutes": "5"}))
    assert "from 15 to 10080" in errors_on(refused.content.decode())["f-refresh_minutes"]
    assert KnowledgeSource.objects.count() == 0 and sent == []

    upstream.secrets = signing_secrets_valid(project=alice.project, purpose=SigningSecret.Purpose.TOOL_SIGNING)
    upstream.respond("faq", json_body=FAQ)
    with django_capture_on_commit_callbacks(execute=True):
        added = client.post("/knowledge/", api_form())
    source = KnowledgeSource.objects.get()
    assert sent == [("agents.knowledge_fetch", (source.pk,))]
    page = client.get(added["Location"]).content.decode()
    assert "It is being fetched now" in page and "fetching" in page

    fetch(source.pk)
    page = client.get(f"/knowledge/{source.pk}/").content.decode()
    assert "fetched" in page and "HTTP 200" in page and "Do you deliver to Oman?" in page
    assert found(alice.project, "shipping to oman") == [
        "Question: Do you deliver to Oman?\nAnswer: Yes, in 5 to 8 working days."
    ]

    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/knowledge/{source.pk}/refresh/")
    assert sent[-1] == ("agents.knowledge_fetch", (source.pk,))
    upstream.respond("faq", status=503, json_body={"error": "down"})
    fetch(source.pk)
    page = client.get(f"/knowledge/{source.pk}/").content.decode()
    assert "fetch failed" in page and "Agents still find the passages of the last good fetch." in page


def test_adding_or_refetching_an_api_source_counts_as_a_fetch_against_the_members_limit(alice, settings):
    """A fetch queued by adding an API source or changing its URL or response goes out like "Fetch now": it counts
    toward KAGENT_DASHBOARD_ACTIONS, and a refused save keeps what was typed and queues nothing."""
    settings.KAGENT_DASHBOARD_ACTIONS = 1
    client = signed_in(alice)
    client.post("/knowledge/", api_form())
    source = KnowledgeSource.objects.get()
    queued = source.fetch_queued_at
    assert queued is not None
    moved = "https://tools.test:8443/respond/faq-2"
    refused = client.post(f"/knowledge/{source.pk}/", api_form(**{"$.url": moved}))
    assert refused.status_code == 422 and "this minute; try again in" in refused.content.decode()
    assert f'value="{moved}"' in refused.content.decode()
    assert KnowledgeSource.objects.get(pk=source.pk).url != moved
    assert KnowledgeSource.objects.get(pk=source.pk).fetch_queued_at == queued  # no second fetch queued
    renamed = client.post(f"/knowledge/{source.pk}/", api_form(**{"$.title": "FAQ (shop)"}))  # fetches nothing
    assert renamed.status_code == 302 and KnowledgeSource.objects.get(pk=source.pk).title == "FAQ (shop)"
    refused = client.post("/knowledge/", api_form(**{"$.title": "Another"}))
    assert refused.status_code == 422 and "this minute; try again in" in refused.content.decode()
    assert KnowledgeSource.objects.count() == 1
