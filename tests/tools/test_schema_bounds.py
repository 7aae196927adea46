"""Tenant JSON Schemas bounded (issue #27, finding 2; SPEC §6 "Tenant JSON Schemas"): the reproductions refused
on every path that writes or tries a schema, a schema stored before the bounds refused at the call instead of run,
validation itself bounded, and a realistic rich schema still accepted.

The reproductions: a property carrying its own `$defs`, each an `allOf` of two `$ref`s to the next (1.9 KB: 1.9 s
to validate at depth 16, no end at 40), the same with the `$defs` at the root, and `uniqueItems` over 4,000 objects
(13.8 s). The tests assert refusals, not durations: each path is bounded by construction."""

from __future__ import annotations

import json
from typing import Any

import jsonschema._keywords
import pytest
from django.test import Client

from tests.examples import seed_order_status
from tests.kagent.test_auth import error
from tests.tools.test_policy import context
from tools import arguments, builtins
from tools.arguments import MAX_ARGUMENT_BYTES, UncheckableArguments, argument_errors
from tools.models import HttpTool
from tools.policy import policy_check
from tools.schema_bounds import (
    MAX_BRANCHES,
    MAX_DEPTH,
    MAX_EXPANDED_SUBSCHEMAS,
    MAX_SCHEMA_BYTES,
    SCHEMA_TOO_COMPLEX,
    tenant_schema_problem,
)
from tools.toolset import ToolSpec

DEPTHS = [16, 40]


def fan_out(depth: int, *, nested: bool) -> dict[str, Any]:
    """The review's schema: definitions d0…d{depth-1}, each an allOf of two $refs to the next, under the property
    itself (`nested`, as reported) or at the root. Validating it visits 2**depth subschemas."""
    base = "#/properties/q/$defs/" if nested else "#/$defs/"
    definitions: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"{base}d{i + 1}"}, {"$ref": f"{base}d{i + 1}"}]} for i in range(depth)
    }
    definitions[f"d{depth}"] = {"type": "string", "maxLength": 64}
    prop: dict[str, Any] = {"type": "string", "$ref": f"{base}d0"}
    schema: dict[str, Any] = {"type": "object", "properties": {"q": prop}, "additionalProperties": False}
    (prop if nested else schema)["$defs"] = definitions
    return schema


FAN_OUTS = [
    pytest.param(depth, nested, id=f"{'nested' if nested else 'root'}-{depth}")
    for depth in DEPTHS
    for nested in (True, False)
]
# What each is refused as: nested $defs aren't allowed at all (the path's usual code); at the root, the expansion
# is over the limit (schema_too_complex).
NESTED_PATH = ".properties.q.$defs"


def expected(nested: bool, unsupported_code: str) -> str:
    return unsupported_code if nested else SCHEMA_TOO_COMPLEX


# --- the check itself ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("depth", "nested"), FAN_OUTS)
def test_fan_out_schemas_are_refused_with_the_path(depth, nested):
    assert len(json.dumps(fan_out(depth, nested=nested))) < 4000  # small: size alone would not catch them
    problem = tenant_schema_problem(fan_out(depth, nested=nested), at="$.p")
    assert problem is not None
    assert problem.too_complex is not nested
    if nested:
        assert problem.path == "$.p" + NESTED_PATH
    else:
        assert problem.path.startswith("$.p.$defs.d") and "fan out" in problem.message
    assert problem.path in problem.text


def test_a_small_fan_out_within_the_limit_is_fine():
    # 2**5 paths: cheap to validate, and within the expansion limit.
    schema = fan_out(5, nested=False)
    assert tenant_schema_problem(schema) is None
    assert argument_errors(schema, {"q": "x"}) == []


@pytest.mark.parametrize(
    ("schema", "path", "too_complex"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}},
            "$.properties.a.uniqueItems",
            True,
        ),
        (
            {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True, "maxItems": 101}}},
            "$.properties.a.uniqueItems",
            True,
        ),
        (
            {"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"items": {"$ref": "#/$defs/a"}}}},
            "$.$defs.a",
            True,
        ),
        ({"type": "object", "properties": {"a": {"if": {}, "then": {}}}}, "$.properties.a.if", False),
        ({"type": "object", "properties": {"a": {"not": {}}}}, "$.properties.a.not", False),
        ({"type": "object", "unevaluatedProperties": False}, "$.unevaluatedProperties", False),
        ({"type": "object", "properties": {"a": {"$id": "https://x.example/a"}}}, "$.properties.a.$id", False),
        ({"type": "object", "properties": {"a": {"$ref": "#"}}}, "$.properties.a.$ref", False),
        ({"type": "object", "properties": {"a": {"$ref": "#/properties/b"}}}, "$.properties.a.$ref", False),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "$.properties.a.$ref", False),
        (
            {"type": "object", "$defs": {"a b": {}, "a%20b": {}}, "properties": {"a": {"$ref": "#/$defs/a%20b"}}},
            "$.properties.a.$ref",
            False,
        ),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}, "$.$schema", False),
        ({"type": "object", "properties": {"a": {"$schema": "x"}}}, "$.properties.a.$schema", False),
        ({"type": "object", "properties": {"a": {"anyOf": [{}] * (MAX_BRANCHES + 1)}}}, "$.properties.a.anyOf", True),
        ({"type": "object", "properties": {"a": {"type": "strin"}}}, "$.properties.a.type", False),
        ({"type": "object", "properties": {"a": {"nullable": True}}}, "$.properties.a.nullable", False),
    ],
)
def test_what_the_bounds_refuse(schema, path, too_complex):
    problem = tenant_schema_problem(schema)
    assert problem is not None
    assert (problem.path, problem.too_complex) == (path, too_complex), problem


def test_depth_and_size_limits():
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_DEPTH):
        deep = {"type": "object", "properties": {"a": deep}}
    problem = tenant_schema_problem(deep)
    assert problem is not None and problem.too_complex and "levels deep" in problem.message
    # Depth counts through references too.
    chain: dict[str, Any] = {f"d{i}": {"items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(MAX_DEPTH)}
    chain[f"d{MAX_DEPTH}"] = {"type": "string"}
    problem = tenant_schema_problem({"type": "object", "$defs": chain, "properties": {"a": {"$ref": "#/$defs/d0"}}})
    assert problem is not None and problem.too_complex
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(MAX_EXPANDED_SUBSCHEMAS)}}
    problem = tenant_schema_problem(wide)
    assert problem is not None and problem.too_complex and "subschemas" in problem.message
    big = {"type": "object", "properties": {"a": {"type": "string", "description": "x" * MAX_SCHEMA_BYTES}}}
    problem = tenant_schema_problem(big)
    assert problem is not None and problem.too_complex and problem.path == "$" and "KiB" in problem.message


# A client tool as a Pydantic model would describe it: definitions used twice, optional fields as anyOf with null,
# enums, formats, patterns, bounds, a uniqueItems list under a small maxItems, annotations.
RICH: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "PlaceOrder",
    "type": "object",
    "$defs": {
        "Address": {
            "type": "object",
            "properties": {
                "line1": {"type": "string", "minLength": 1, "maxLength": 200},
                "city": {"type": "string", "examples": ["Riyadh"]},
                "postcode": {"anyOf": [{"type": "string", "pattern": "^[0-9]{5}$"}, {"type": "null"}], "default": None},
                "country": {"enum": ["SA", "AE", "KW"], "default": "SA"},
            },
            "required": ["line1", "city"],
            "additionalProperties": False,
        },
        "Item": {
            "type": "object",
            "properties": {
                "sku": {"type": "string", "pattern": "^[A-Z0-9-]{3,20}$"},
                "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
                "gift_wrap": {"type": "boolean", "default": False},
                "price": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.01},
            },
            "required": ["sku", "quantity"],
            "additionalProperties": False,
        },
    },
    "properties": {
        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1, "maxItems": 20},
        "shipping": {"$ref": "#/$defs/Address"},
        "billing": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]},
        "delivery_date": {"type": ["string", "null"], "format": "date", "description": "YYYY-MM-DD"},
        "coupons": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 5},
        "channel": {"const": "app"},
        "notes": {"type": "string", "maxLength": 1000, "deprecated": False, "$comment": "free text"},
        "pay": {
            "oneOf": [
                {"type": "object", "properties": {"card_last4": {"type": "string"}}, "required": ["card_last4"]},
                {"type": "object", "properties": {"cash": {"const": True}}, "required": ["cash"]},
            ]
        },
        "tags": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 10},
    },
    "required": ["items", "shipping"],
    "additionalProperties": False,
}
RICH_ARGUMENTS = {
    "items": [{"sku": "ABC-1", "quantity": 2}, {"sku": "XYZ-22", "quantity": 1, "gift_wrap": True, "price": 9.99}],
    "shipping": {"line1": "King Fahd Rd", "city": "Riyadh", "postcode": "12345"},
    "billing": None,
    "delivery_date": "2030-01-02",
    "coupons": ["A", "B"],
    "channel": "app",
    "pay": {"cash": True},
    "tags": {"k": "v"},
}


def client_tool(parameters: dict[str, Any], name: str = "place_order") -> dict[str, Any]:
    return {"name": name, "description": "Place the order.", "effect": "action", "parameters": parameters}


def policy_on(parameters: dict[str, Any], args: Any) -> Any:
    """The policy check of a call to a client tool whose schema is stored as `parameters` (no write-time check)."""
    spec = {"name": "lookup", "kind": "client", "effect": "read", "description": "x", "parameters": parameters}
    raw = args if isinstance(args, str) else json.dumps(args)
    return policy_check(context(tool_set=(ToolSpec.from_dict(spec),)), "lookup", raw)


def test_a_realistic_rich_schema_is_within_the_bounds_and_validates():
    assert tenant_schema_problem(RICH) is None
    assert policy_on(RICH, RICH_ARGUMENTS).allowed
    twice = {**RICH_ARGUMENTS, "coupons": ["A", "A"]}
    assert policy_on(RICH, twice).code == "invalid_arguments"
    assert policy_on(RICH, {**RICH_ARGUMENTS, "items": [{"sku": "ab", "quantity": 0}]}).code == "invalid_arguments"


def test_every_built_in_tool_schema_is_within_the_bounds():
    for name in builtins.BUILTIN_NAMES:
        assert tenant_schema_problem(builtins.get(name).parameters) is None, name


# --- at call time: stored schemas, and validation itself ----------------------------------------------------------


@pytest.mark.parametrize(("depth", "nested"), FAN_OUTS)
def test_a_stored_fan_out_schema_refuses_the_call_instead_of_running(depth, nested):
    decision = policy_on(fan_out(depth, nested=nested), {"q": "x"})
    assert (decision.allowed, decision.code) == (False, "invalid_arguments")
    assert "outside the bounds" in decision.guidance


def pairwise_comparisons(monkeypatch: Any) -> list[int]:
    """Calls of jsonschema's own `uniqueItems` comparison (every pair of items), counted."""
    calls: list[int] = []
    monkeypatch.setattr(jsonschema._keywords, "uniq", lambda items: calls.append(len(items)) or True)
    return calls


def test_a_stored_unique_items_schema_without_max_items_refuses_a_4000_object_argument(monkeypatch):
    compared = pairwise_comparisons(monkeypatch)
    parameters = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}
    args = {"xs": [{"a": n} for n in range(4000)]}
    assert 45_000 < len(json.dumps(args)) < MAX_ARGUMENT_BYTES  # the review's 50 KB
    decision = policy_on(parameters, args)
    assert (decision.allowed, decision.code) == (False, "invalid_arguments")
    assert compared == []


def test_unique_items_is_checked_without_comparing_every_pair(monkeypatch):
    compared = pairwise_comparisons(monkeypatch)
    parameters = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True, "maxItems": 100}}}
    # Over maxItems (refused), and the uniqueness of the 4,000 objects still computed: one key per item.
    assert policy_on(parameters, {"xs": [{"a": n} for n in range(4000)]}).code == "invalid_arguments"
    schema = parameters["properties"]["xs"]
    assert argument_errors(schema, [{"a": 1}, {"a": 1.0}]) != []  # 1 and 1.0 are equal in JSON Schema
    assert argument_errors(schema, [1, True]) == []  # true is not 1
    assert argument_errors(schema, [[1, {"b": [2]}], [1, {"b": [2.0]}]]) != []
    assert argument_errors(schema, [{"a": 1, "b": 2}, {"b": 2, "a": 1}]) != []
    assert argument_errors(schema, [{"a": 1}, {"a": "1"}, {"a": None}, None, "1", 1.5]) == []
    assert compared == []


def test_every_keyword_runs_within_the_budget(monkeypatch):
    # No pattern anywhere: the budget bounds every keyword, not only the regular expressions.
    monkeypatch.setattr(arguments, "CHECK_BUDGET_S", 0.0)
    with pytest.raises(UncheckableArguments, match="in time"):
        argument_errors({"type": "object", "properties": {"a": {"type": "integer"}}}, {"a": 1})


def test_arguments_are_bounded_in_size():
    parameters = {"type": "object", "properties": {"note": {"type": "string"}}}
    decision = policy_on(parameters, {"note": "x" * MAX_ARGUMENT_BYTES})
    assert decision.code == "invalid_arguments" and "KiB" in decision.guidance
    assert policy_on(parameters, {"note": "x" * 1000}).allowed


# --- at write time, on every path ---------------------------------------------------------------------------------


def http_tool(parameters: dict[str, Any]) -> dict[str, Any]:
    tool = seed_order_status(requires_verified_user=False)
    tool["config"]["url"] = "https://api.example.com/search?q={{args.q}}"
    tool["config"].pop("headers")
    tool["config"]["parameters"] = parameters
    return tool


def assert_refused(response: Any, code: str, path: str) -> None:
    assert response.status_code == 422, response.json()
    assert error(response) == code
    body = response.json()["error"]
    assert body["details"][0]["path"].startswith(path)
    assert body["details"][0]["path"] in body["message"]


@pytest.mark.django_db
@pytest.mark.parametrize(("depth", "nested"), FAN_OUTS)
def test_tool_writes_refuse_fan_out_schemas(api, depth, nested):
    schema = fan_out(depth, nested=nested)
    code = expected(nested, "invalid_parameters")
    assert_refused(api.post("/v1/tools", http_tool(schema), format="json"), code, "$.config.parameters")
    assert not HttpTool.objects.exists()
    good = http_tool({"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False})
    assert api.post("/v1/tools", good, format="json").status_code == 201
    patch = {"config": {"parameters": schema}}
    assert_refused(api.patch("/v1/tools/order_status", patch, format="json"), code, "$.config.parameters")
    assert HttpTool.objects.get().config["parameters"] == good["config"]["parameters"]


@pytest.mark.django_db
@pytest.mark.parametrize(("depth", "nested"), FAN_OUTS)
def test_the_draft_preview_refuses_fan_out_schemas(api, depth, nested):
    body = {"tool": http_tool(fan_out(depth, nested=nested)), "arguments": {"q": "x"}}
    response = api.post("/v1/tool_drafts/preview", body, format="json")
    assert_refused(response, expected(nested, "invalid_parameters"), "$.config.parameters")


@pytest.mark.django_db
@pytest.mark.parametrize(("depth", "nested"), FAN_OUTS)
def test_the_dashboard_preview_and_save_refuse_fan_out_schemas(alice, depth, nested):
    client = Client()
    client.force_login(alice.user)
    form = {
        "$.name": "search",
        "$.description": "Search.",
        "$.effect": "read",
        "$.config.method": "GET",
        "$.config.url": "https://api.example.com/search?q={{args.q}}",
        "$.config.parameters": json.dumps(fan_out(depth, nested=nested)),
        "$.sample.arguments.q": "x",
    }
    preview = client.post("/tools/preview/", form).content.decode()
    assert "GET https://api.example.com" not in preview
    assert "$defs" in preview
    saved = client.post("/tools/new/", form)
    assert saved.status_code == 422 and b"$defs" in saved.content
    assert not HttpTool.objects.exists()


@pytest.mark.django_db
def test_a_stored_tool_with_a_fan_out_schema_previews_as_an_error_not_a_hang(api, alice):
    # Stored before the bounds existed: written past the service, as an old row would be.
    tool = http_tool(fan_out(40, nested=True))
    HttpTool.objects.create(project=alice.project, **tool)
    response = api.post("/v1/tools/order_status/preview", {"arguments": {"q": "x"}}, format="json")
    assert response.status_code == 200
    assert response.json()["request"] is None and "outside the bounds" in response.json()["error"]["message"]


@pytest.mark.django_db
@pytest.mark.parametrize(("depth", "nested"), FAN_OUTS)
def test_client_tools_in_agent_config_refuse_fan_out_schemas(api, depth, nested):
    config = {"tools": {"client": [client_tool(fan_out(depth, nested=nested))]}}
    code = expected(nested, "invalid_config")
    response = api.post("/v1/agents", {"name": "A", "config": config}, format="json")
    assert_refused(response, code, "$.tools.client[0].parameters")
    assert api.get("/v1/agents").json()["data"] == []
    agent = api.post("/v1/agents", {"name": "A", "config": {}}, format="json").json()
    response = api.patch(f"/v1/agents/{agent['id']}", {"config": config}, format="json")
    assert_refused(response, code, "$.tools.client[0].parameters")
    assert api.get(f"/v1/agents/{agent['id']}").json()["config"]["tools"]["client"] == []


@pytest.mark.django_db
def test_client_tools_refuse_unique_items_without_a_small_max_items(api):
    for items in ({"type": "array", "uniqueItems": True}, {"type": "array", "uniqueItems": True, "maxItems": 4000}):
        parameters = {"type": "object", "properties": {"xs": items}}
        config = {"tools": {"client": [client_tool(parameters)]}}
        response = api.post("/v1/agents", {"name": "A", "config": config}, format="json")
        assert_refused(response, SCHEMA_TOO_COMPLEX, "$.tools.client[0].parameters.properties.xs.uniqueItems")


@pytest.mark.django_db
def test_a_realistic_rich_client_tool_is_accepted(api):
    config = {"tools": {"client": [client_tool(RICH)]}}
    response = api.post("/v1/agents", {"name": "A", "config": config}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["config"]["tools"]["client"][0]["parameters"] == RICH


@pytest.mark.django_db
def test_someone_elses_tool_is_not_theirs_to_patch(api, bob):
    good = http_tool({"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False})
    assert api.post("/v1/tools", good, format="json").status_code == 201
    patch = {"config": {"parameters": fan_out(16, nested=False)}}
    assert bob.client().patch("/v1/tools/order_status", patch, format="json").status_code == 404
