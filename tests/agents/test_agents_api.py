"""`/v1/agents`: the draft config validated with JSON Schema on every write, publishing immutable versions that
hold copies of the granted HTTP tools, and someone else's project as a 404."""

import pytest

from agents.models import AgentVersion
from tests.kagent.test_auth import error
from tests.tools.test_http_tools_api import order_status
from tools import builtins


def create(api, **body):
    body.setdefault("name", "Support")
    response = api.post("/v1/agents", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.mark.django_db
def test_create_fills_defaults(api):
    agent = create(api, config={"instructions": "Be kind."})
    assert agent["id"].startswith("agt_")
    assert agent["object"] == "agent"
    assert agent["latest_version"] is None
    assert agent["actions_paused"] is False
    tools = agent["config"]["tools"]
    assert tools["enabled"] is True
    assert tools["max_tool_rounds"] == 3
    assert tools["allow_anonymous_actions"] is False
    assert agent["config"]["instructions"] == "Be kind."
    assert isinstance(agent["created_at"], int)
    assert api.get(f"/v1/agents/{agent['id']}").json() == agent


INVALID_CONFIGS = [
    ({"tools": {"max_tool_rounds": 0}}, "$.tools.max_tool_rounds"),
    ({"tools": {"max_tool_rounds": 6}}, "$.tools.max_tool_rounds"),
    ({"tools": {"max_tool_rounds": "3"}}, "$.tools.max_tool_rounds"),
    ({"tools": {"builtin": {"delete_everything": {"enabled": True}}}}, "$.tools.builtin"),
    ({"tools": {"builtin": {"create_ticket": {"rules": "x" * 4001}}}}, "$.tools.builtin.create_ticket.rules"),
    ({"tools": {"http": [{"tool": "order_status", "rules": "x" * 4001}]}}, "$.tools.http[0].rules"),
    ({"tools": {"client": [{"name": "Get-Cart", "description": "x"}]}}, "$.tools.client[0].name"),
    ({"tools": {"client": [{"name": "a" * 49, "description": "x"}]}}, "$.tools.client[0].name"),
    (
        {"tools": {"client": [{"name": "get_cart", "description": "x", "effect": "escalation"}]}},
        "$.tools.client[0].effect",
    ),
    (
        {"tools": {"client": [{"name": "get_cart", "description": "x", "parameters": {"type": "array"}}]}},
        "$.tools.client[0].parameters",
    ),
    (
        {
            "tools": {
                "client": [{"name": "get_cart", "description": "x", "parameters": {"type": "object", "properties": 5}}]
            }
        },
        "$.tools.client[0].parameters.properties",
    ),
    (
        {
            "tools": {
                "client": [
                    {
                        "name": "get_cart",
                        "description": "x",
                        "parameters": {"type": "object", "properties": {"a": {"$ref": "http://10.0.0.1:6379/"}}},
                    }
                ]
            }
        },
        "$.tools.client[0].parameters.properties.a.$ref",
    ),
    (
        {
            "tools": {
                "client": [
                    {
                        "name": "get_cart",
                        "description": "x",
                        "parameters": {
                            "type": "object",
                            "patternProperties": {"^(a+)+$": {}},
                            "unevaluatedProperties": False,
                        },
                    }
                ]
            }
        },
        "$.tools.client[0].parameters.unevaluatedProperties",
    ),
    ({"model": {"provider": "gpt"}}, "$.model.provider"),
    ({"model": {"provider": "openai_compatible", "base_url": "http://10.0.0.1/v1"}}, "$.model.base_url"),
    ({"model": {"provider": "openai_compatible", "base_url": "https://llm.example.com/v1"}}, "$.model"),
    ({"variables": {"Store-Id": "1"}}, "$.variables"),
    ({"variables": {"store_id\n": "1"}}, "$.variables"),  # `$` alone would take a final newline
    ({"model": {"provider": "openai_compatible", "api_key_secret": "LLM_KEY\n"}}, "$.model.api_key_secret"),
    ({"variables": {"store_id": 1}}, "$.variables.store_id"),
    ({"business_hours": {"timezone": "Mars/Olympus"}}, "$.business_hours.timezone"),
    (
        {"business_hours": {"timezone": "Asia/Riyadh", "weekly": [{"day": "mon", "open": "17:00", "close": "09:00"}]}},
        "$.business_hours.weekly[0]",
    ),
    (
        {"business_hours": {"timezone": "Asia/Riyadh", "closed_dates": ["2026-02-30"]}},
        "$.business_hours.closed_dates[0]",
    ),
    ({"unknown_key": 1}, "$"),
    ({"instructions": "x" * 20001}, "$.instructions"),
]


@pytest.mark.parametrize(("config", "path"), INVALID_CONFIGS)
@pytest.mark.django_db
def test_invalid_config_is_422_with_the_json_path(api, config, path):
    response = api.post("/v1/agents", {"name": "A", "config": config}, format="json")
    assert response.status_code == 422, response.json()
    assert error(response) == "invalid_config"
    paths = [d["path"] for d in response.json()["error"]["details"]]
    assert path in paths, paths
    # A huge value is not echoed back in the message.
    assert len(response.content) < 4000
    assert api.get("/v1/agents").json()["data"] == []


NAME_CONFLICTS = [
    {"tools": {"client": [{"name": "transfer_to_human", "description": "x"}]}},
    {"tools": {"client": [{"name": "get_cart", "description": "x"}, {"name": "get_cart", "description": "y"}]}},
    {"tools": {"http": [{"tool": "order_status"}], "client": [{"name": "order_status", "description": "x"}]}},
    {"tools": {"http": [{"tool": "order_status"}, {"tool": "order_status"}]}},
    {"tools": {"http": [{"tool": "create_ticket"}]}},
]


@pytest.mark.parametrize("config", NAME_CONFLICTS)
@pytest.mark.django_db
def test_tool_names_are_unique_across_kinds_and_never_a_builtin(api, config):
    response = api.post("/v1/agents", {"name": "A", "config": config}, format="json")
    assert response.status_code == 422
    assert error(response) == "tool_name_conflict"


@pytest.mark.django_db
def test_client_tool_effect_defaults_to_action(api):
    agent = create(api, config={"tools": {"client": [{"name": "get_cart", "description": "The cart."}]}})
    client = agent["config"]["tools"]["client"][0]
    assert client["effect"] == "action"
    assert client["parameters"]["type"] == "object"


@pytest.mark.django_db
def test_patch_merges_the_config_and_validates_the_result(api):
    agent = create(api, config={"instructions": "Be kind.", "variables": {"store_id": "7"}})
    response = api.patch(f"/v1/agents/{agent['id']}", {"config": {"tools": {"max_tool_rounds": 5}}}, format="json")
    assert response.status_code == 200
    config = response.json()["config"]
    assert config["tools"]["max_tool_rounds"] == 5
    assert config["instructions"] == "Be kind."
    # null removes a key (JSON merge patch)
    config = api.patch(
        f"/v1/agents/{agent['id']}", {"config": {"variables": {"store_id": None}}}, format="json"
    ).json()["config"]
    assert config["variables"] == {}
    response = api.patch(f"/v1/agents/{agent['id']}", {"config": {"tools": {"max_tool_rounds": 9}}}, format="json")
    assert response.status_code == 422 and error(response) == "invalid_config"
    assert api.get(f"/v1/agents/{agent['id']}").json()["config"]["tools"]["max_tool_rounds"] == 5


@pytest.mark.django_db
def test_actions_paused_is_live_without_publishing(api):
    agent = create(api)
    api.post(f"/v1/agents/{agent['id']}/publish", {}, format="json")
    response = api.patch(f"/v1/agents/{agent['id']}", {"actions_paused": True}, format="json")
    assert response.json()["actions_paused"] is True
    assert response.json()["latest_version"] == 1
    assert api.get(f"/v1/agents/{agent['id']}/versions").json()["data"][0]["number"] == 1
    response = api.patch(f"/v1/agents/{agent['id']}", {"actions_paused": "yes"}, format="json")
    assert response.status_code == 422


@pytest.mark.django_db
def test_publish_twice_edit_between_and_versions_never_change(api):
    api.post("/v1/tools", order_status(), format="json")
    agent = create(api, config={"instructions": "v1", "tools": {"http": [{"tool": "order_status", "rules": "r"}]}})
    v1 = api.post(f"/v1/agents/{agent['id']}/publish", {"note": "first"}, format="json")
    assert v1.status_code == 201
    v1 = v1.json()
    assert v1["number"] == 1 and v1["note"] == "first" and v1["id"].startswith("ver_")
    assert v1["config"]["instructions"] == "v1"
    assert v1["http_tools"]["order_status"]["config"]["timeout_ms"] == 8000
    assert v1["builtin_versions"] == builtins.versions()

    # Editing the tool and the draft changes no version.
    api.patch("/v1/tools/order_status", {"config": {"timeout_ms": 3000}, "description": "Edited."}, format="json")
    api.patch(f"/v1/agents/{agent['id']}", {"config": {"instructions": "v2"}}, format="json")
    assert api.get(f"/v1/agents/{agent['id']}/versions/1").json() == v1

    v2 = api.post(f"/v1/agents/{agent['id']}/publish", {"note": "second"}, format="json").json()
    assert v2["number"] == 2
    assert v2["config"]["instructions"] == "v2"
    assert v2["http_tools"]["order_status"]["config"]["timeout_ms"] == 3000
    assert v2["http_tools"]["order_status"]["description"] == "Edited."
    assert api.get(f"/v1/agents/{agent['id']}/versions/1").json() == v1
    listed = api.get(f"/v1/agents/{agent['id']}/versions").json()
    assert [v["number"] for v in listed["data"]] == [2, 1]
    assert api.get(f"/v1/agents/{agent['id']}").json()["latest_version"] == 2
    # Deleting the tool later still leaves the published copies intact.
    api.patch(f"/v1/agents/{agent['id']}", {"config": {"tools": {"http": []}}}, format="json")
    api.delete("/v1/tools/order_status")
    assert api.get(f"/v1/agents/{agent['id']}/versions/2").json() == v2


@pytest.mark.django_db
def test_publish_refuses_a_grant_of_a_tool_that_does_not_exist(api):
    agent = create(api, config={"tools": {"http": [{"tool": "order_status"}]}})
    response = api.post(f"/v1/agents/{agent['id']}/publish", {"note": "x"}, format="json")
    assert response.status_code == 422
    assert error(response) == "unknown_tool"
    assert AgentVersion.objects.count() == 0
    assert api.get(f"/v1/agents/{agent['id']}").json()["latest_version"] is None


@pytest.mark.django_db
def test_publish_with_an_empty_body(api):
    agent = create(api)
    response = api.post(f"/v1/agents/{agent['id']}/publish")
    assert response.status_code == 201
    assert response.json()["note"] == ""


@pytest.mark.django_db
def test_unknown_version_is_404(api):
    agent = create(api)
    assert api.get(f"/v1/agents/{agent['id']}/versions/1").status_code == 404


@pytest.mark.django_db
def test_delete_agent(api):
    agent = create(api)
    assert api.delete(f"/v1/agents/{agent['id']}").json() == {"id": agent["id"], "object": "agent", "deleted": True}
    assert api.get(f"/v1/agents/{agent['id']}").status_code == 404
    assert api.get("/v1/agents").json()["data"] == []


@pytest.mark.django_db
def test_list_pagination_newest_first(api):
    ids = [create(api, name=f"A{i}")["id"] for i in range(5)]
    page = api.get("/v1/agents?limit=2").json()
    assert [a["id"] for a in page["data"]] == ids[::-1][:2]
    page2 = api.get(f"/v1/agents?limit=2&cursor={page['next']}").json()
    assert [a["id"] for a in page2["data"]] == ids[::-1][2:4]
    page3 = api.get(f"/v1/agents?limit=2&cursor={page2['next']}").json()
    assert [a["id"] for a in page3["data"]] == ids[:1]
    assert page3["next"] is None


@pytest.mark.django_db
def test_someone_elses_agents_are_404_everywhere(alice, bob):
    mine = alice.client()
    agent = create(mine)
    mine.post(f"/v1/agents/{agent['id']}/publish", {}, format="json")
    other = bob.client()
    base = f"/v1/agents/{agent['id']}"
    for method, path, body in [
        ("get", base, None),
        ("patch", base, {"name": "stolen"}),
        ("delete", base, None),
        ("post", f"{base}/publish", {}),
        ("get", f"{base}/versions", None),
        ("get", f"{base}/versions/1", None),
    ]:
        response = getattr(other, method)(path, body, format="json")
        assert response.status_code == 404, (method, path)
        assert error(response) == "not_found"
    assert other.get("/v1/agents").json()["data"] == []
    assert mine.get(base).json()["name"] == "Support"
    assert mine.get(f"{base}/versions").json()["data"][0]["number"] == 1


def test_the_operators_endpoint_offers_only_its_own_models(api, settings):
    """Second security review, item 8: on the operator's endpoint the operator pays; an agent names only what it
    offers (or no model: the default), anything else with its own base_url and key."""
    settings.KAGENT_OPERATOR_MODELS = ["gpt-4o-mini", "acme-*"]

    def create(model):
        return api.post("/v1/agents", {"name": "m", "config": {"model": model}}, format="json")

    refused = create({"provider": "openai_compatible", "name": "gpt-4.5-preview"})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "model_not_allowed"
    assert "gpt-4o-mini" in refused.json()["error"]["message"]
    assert create({"provider": "openai_compatible", "name": "gpt-4o-mini"}).status_code == 201
    assert create({"provider": "openai_compatible", "name": "acme-large"}).status_code == 201
    assert create({"provider": "openai_compatible"}).status_code == 201
    own = {"provider": "openai_compatible", "name": "gpt-4.5-preview", "base_url": "https://llm.example.com/v1"}
    assert create({**own, "api_key_secret": "LLM_KEY"}).status_code == 201
    # A PATCH is checked the same way.
    agent = create({"provider": "openai_compatible"}).json()["id"]
    patched = api.patch(f"/v1/agents/{agent}", {"config": {"model": {"name": "o1-pro"}}}, format="json")
    assert patched.status_code == 422 and patched.json()["error"]["code"] == "model_not_allowed"


def test_with_no_list_the_operators_default_model_only(api, settings):
    settings.KAGENT_OPERATOR_MODELS = []
    settings.KAGENT_LLM_MODEL = "house-model"
    body = {"name": "m", "config": {"model": {"provider": "openai_compatible", "name": "other"}}}
    assert api.post("/v1/agents", body, format="json").status_code == 422
    body["config"]["model"]["name"] = "house-model"
    assert api.post("/v1/agents", body, format="json").status_code == 201


@pytest.mark.django_db
def test_the_greeting_a_chat_shows_is_the_published_ones_readable_with_a_publishable_key(alice, api):
    agent = create(api, config={"greeting": "Hi! Ask me about your order."})["id"]
    browser = alice.client(alice.publishable_key)
    unpublished = browser.get(f"/v1/agents/{agent}/greeting")
    assert unpublished.status_code == 409 and error(unpublished) == "not_published"
    assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201

    greeting = browser.get(f"/v1/agents/{agent}/greeting").json()
    assert greeting == {
        "object": "agent_greeting",
        "agent": agent,
        "version": 1,
        "greeting": "Hi! Ask me about your order.",
    }
    # The draft's new words wait for a publish; an empty greeting reads as none.
    assert api.patch(f"/v1/agents/{agent}", {"config": {"greeting": "  "}}, format="json").status_code == 200
    assert browser.get(f"/v1/agents/{agent}/greeting").json()["greeting"] == "Hi! Ask me about your order."
    assert api.post(f"/v1/agents/{agent}/publish", {}, format="json").status_code == 201
    assert browser.get(f"/v1/agents/{agent}/greeting").json() == {**greeting, "version": 2, "greeting": None}
    # Rolled back, customers meet version 1 again, greeting and all.
    assert api.post(f"/v1/agents/{agent}/rollback", {"version": 1}, format="json").status_code == 200
    assert browser.get(f"/v1/agents/{agent}/greeting").json() == greeting
    # The publishable key reads the greeting, nothing else of the agent.
    refused = browser.get(f"/v1/agents/{agent}")
    assert refused.status_code == 403 and error(refused) == "publishable_key_not_allowed"


@pytest.mark.django_db
def test_a_greeting_too_long_is_refused_in_plain_words(api):
    response = api.post("/v1/agents", {"name": "Support", "config": {"greeting": "x" * 501}}, format="json")
    assert response.status_code == 422
    assert response.json()["error"] == {
        "code": "invalid_config",
        "message": "The greeting is text of at most 500 characters.",
        "details": [{"path": "$.greeting", "message": "The greeting is text of at most 500 characters."}],
    }
