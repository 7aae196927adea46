"""`/v1/tools`: every templating rule of the seed checked at write time, one 422 code each; a refused write changes
nothing; someone else's project is a 404."""

import copy

import pytest

from tests.examples import seed_order_status
from tests.kagent.test_auth import error
from tools.models import HttpTool


def order_status(**overrides):
    return seed_order_status(**overrides)


def with_config(**config):
    tool = order_status()
    tool["config"].update(config)
    return tool


def with_params(properties, required=(), verified=True):
    tool = order_status(requires_verified_user=verified)
    tool["config"]["url"] = "https://api.example.com/orders"
    tool["config"]["parameters"] = {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }
    return tool


def body_tool(body, method="POST", properties=None):
    tool = order_status(effect="action")
    tool["config"].update(
        method=method,
        url="https://api.example.com/tickets",
        body=body,
        parameters={
            "type": "object",
            "properties": properties or {"note": {"type": "string", "x-kagent-format": "text"}},
            "additionalProperties": False,
        },
    )
    return tool


@pytest.mark.django_db
def test_the_seed_example_is_accepted(api):
    response = api.post("/v1/tools", order_status(), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["id"].startswith("tool_")
    assert body["object"] == "tool"
    assert body["name"] == "order_status"
    assert body["config"]["timeout_ms"] == 8000
    assert api.get("/v1/tools/order_status").json() == body
    assert [t["name"] for t in api.get("/v1/tools").json()["data"]] == ["order_status"]


VALID_VARIANTS = [
    order_status(
        requires_verified_user=False,
        config={"method": "GET", "url": "https://api.example.com/stores/{{var.store_id}}/hours"},
    ),
    with_config(url="https://api.example.com:8443/orders/{{args.order_number}}?lang={{var.lang}}&v=2"),
    with_config(url="https://api.example.com/orders/ord-{{args.order_number}}/"),
    body_tool({"note": "{{args.note}}", "meta": {"source": "k-agent", "tags": ["a", "{{var.channel}}"]}}),
    body_tool({"note": "Customer says: {{args.note}}"}, method="PATCH"),
    with_params({"order_number": {"type": "string", "x-kagent-format": "token"}, "count": {"type": "integer"}}),
    with_config(url="https://api.example.com/customers/{{end_user.traits.tier}}/orders/{{args.order_number}}"),
]


@pytest.mark.parametrize("tool", VALID_VARIANTS)
@pytest.mark.django_db
def test_valid_definitions_are_accepted(api, tool):
    response = api.post("/v1/tools", tool, format="json")
    assert response.status_code == 201, response.json()


HOSTILE = [
    # name
    ("invalid_tool_name", order_status(name="Order_Status")),
    ("invalid_tool_name", order_status(name="1order")),
    ("invalid_tool_name", order_status(name="a" * 31)),
    ("invalid_tool_name", order_status(name="order-status")),
    ("invalid_tool_name", order_status(name="")),
    ("invalid_tool_name", order_status(name="order_status\n")),  # `$` alone would take a final newline
    ("tool_name_conflict", order_status(name="transfer_to_human")),
    ("tool_name_conflict", order_status(name="create_ticket")),
    ("tool_name_conflict", order_status(name="search_knowledge")),
    # the literal https://host[:port]/ prefix
    ("invalid_url", with_config(url="http://api.example.com/orders")),
    ("invalid_url", with_config(url="https://api.example.com")),
    ("invalid_url", with_config(url="https://api.example.com?x=1")),
    ("invalid_url", with_config(url="ftp://api.example.com/x")),
    ("invalid_url", with_config(url="//api.example.com/x")),
    ("invalid_url", with_config(url="https://{{var.host}}/orders")),
    ("invalid_url", with_config(url="https://api.{{var.env}}.example.com/orders")),
    ("invalid_url", with_config(url="https://api.example.com:{{var.port}}/orders")),
    ("invalid_url", with_config(url="{{var.base}}/orders")),
    ("invalid_url", with_config(url="https://user:pass@api.example.com/orders")),
    ("invalid_url", with_config(url="https://api.example.com\\@evil.com/orders")),
    ("invalid_url", with_config(url="https://127.0.0.1/orders")),
    ("invalid_url", with_config(url="https://[::1]/orders")),
    ("invalid_url", with_config(url="https://2130706433/orders")),
    ("invalid_url", with_config(url="https://localhost/orders")),
    ("invalid_url", with_config(url="https://api.example.com:22/orders")),
    ("invalid_url", with_config(url="https://api.example.com:80/orders")),
    ("invalid_url", with_config(url="https://api.example.com:0443/orders")),
    ("invalid_url", with_config(url="https://api.example.com:99999/orders")),
    ("invalid_url", with_config(url="https://API.example.com/orders")),
    ("invalid_url", with_config(url="https://api.exämple.com/orders")),
    ("invalid_url", with_config(url="https://api。example。com/orders")),
    ("invalid_url", with_config(url="https://api.example.com/a/../admin")),
    ("invalid_url", with_config(url="https://api.example.com/a/%2e%2e/admin")),
    ("invalid_url", with_config(url="https://api.example.com/a/./b")),
    ("invalid_url", with_config(url="https://api.example.com/orders#frag")),
    ("invalid_url", with_config(url="https://api.example.com/orders x")),
    # placeholders only in the path and query values
    ("placeholder_position", with_config(url="https://api.example.com/orders?{{args.order_number}}=1")),
    ("placeholder_position", with_config(headers={"X-{{args.order_number}}": "1"})),
    ("placeholder_position", body_tool({"{{args.note}}": "x"})),
    # templates well-formed, roots known
    ("invalid_template", with_config(url="https://api.example.com/orders/{{args.order_number}")),
    ("invalid_template", with_config(url="https://api.example.com/orders/{{ args.order_number }}")),
    ("invalid_template", with_config(url="https://api.example.com/orders/{{args}}")),
    ("invalid_template", with_config(url="https://api.example.com/orders/{{args.order_number|upper}}")),
    ("invalid_template", with_config(url="https://api.example.com/orders/{{{args.order_number}}}")),
    ("invalid_template", with_config(headers={"Authorization": "Bearer {{secret.orders_token}}"})),
    ("invalid_template", with_config(url="https://api.example.com/orders/{{args.a.b}}")),
    ("unknown_placeholder", with_config(url="https://api.example.com/orders/{{sys.env}}")),
    ("unknown_placeholder", with_config(url="https://api.example.com/orders/{{env.HOME}}")),
    ("unknown_placeholder", with_config(url="https://api.example.com/orders/{{end_user.email}}")),
    ("unknown_placeholder", with_config(headers={"X-Trace": "{{request.id}}"})),
    ("unknown_parameter", with_config(url="https://api.example.com/orders/{{args.other}}")),
    # at most 8 parameters, reserved names
    ("too_many_parameters", with_params({f"p{i}": {"type": "string"} for i in range(9)}, verified=False)),
    *[
        ("reserved_name", with_params({name: {"type": "string"}}, verified=False))
        for name in ("args", "end_user", "secret", "var", "sys")
    ],
    # end_user only with requires_verified_user, and identity never a parameter there
    ("end_user_requires_verified_user", order_status(requires_verified_user=False)),
    (
        "end_user_requires_verified_user",
        order_status(
            requires_verified_user=False,
            config={
                **order_status()["config"],
                "url": "https://api.example.com/x/{{end_user.traits.tier}}/{{args.order_number}}",
            },
        ),
    ),
    *[
        ("identity_as_parameter", with_params({name: {"type": "string"}}))
        for name in (
            "phone",
            "mobile",
            "email",
            "user_id",
            "customer_id",
            "account_id",
            "external_id",
            "phone_number",
            "customer_email",
            "userId".lower(),
            "e_mail",
            "mail",
            "email2",
            "phone1",
            "cust_id",
            "account_no",
        )
    ],
    ("invalid_url", with_config(url="https://api.example.com/x/%2{{args.order_number}}/y")),
    ("invalid_url", with_config(url="https://api.example.com/x/%zz/{{args.order_number}}")),
    # x-kagent-format
    ("invalid_format", with_params({"q": {"type": "string", "x-kagent-format": "html"}})),
    ("invalid_format", with_params({"q": {"type": "integer", "x-kagent-format": "text"}})),
    (
        "invalid_format",
        order_status(
            config={
                **order_status()["config"],
                "parameters": {
                    "type": "object",
                    "properties": {"order_number": {"type": "string", "x-kagent-format": "text"}},
                    "additionalProperties": False,
                },
            }
        ),
    ),
    (
        "invalid_format",
        body_tool({"note": "x"}, properties={"note": {"type": "string", "x-kagent-format": "text"}})
        | {"config": {**body_tool({})["config"], "headers": {"X-Note": "{{args.note}}"}}},
    ),
    # forbidden headers
    *[
        ("forbidden_header", with_config(headers={name: "x"}))
        for name in (
            "Host",
            "host",
            "Forwarded",
            "X-Forwarded-For",
            "X-Forwarded-Host",
            "X-Real-IP",
            "Connection",
            "Transfer-Encoding",
            "Content-Length",
            "Proxy-Authorization",
            "Proxy-Connection",
            "webhook-signature",
            "User-Agent",
            "Accept-Encoding",
        )
    ],
    # response limits, timeout
    ("too_many_fields", with_config(response={"fields": [{"path": f"f{i}", "label": f"F{i}"} for i in range(13)]})),
    ("too_many_items", with_config(response={"max_items": 21})),
    ("invalid_timeout", with_config(timeout_ms=15001)),
    # bodies
    ("invalid_body", body_tool({"note": "{{args.note}}"}, method="GET")),
    ("invalid_body", body_tool({"note": "{{args.note}}"}, method="DELETE")),
    # parameter schemas
    ("invalid_parameters", with_params({"q": {"type": "object"}}, verified=False)),
    ("invalid_parameters", with_params({"q": {"type": "string"}}, required=["nope"], verified=False)),
    ("invalid_parameters", with_config(parameters={"type": "array"})),
    ("invalid_parameters", with_config(parameters={"type": "object", "properties": {}, "additionalProperties": True})),
    (
        "invalid_parameters",
        with_params({"q": {"type": "string", "$ref": "http://169.254.169.254/latest"}}, verified=False),
    ),
    (
        "invalid_parameters",
        with_params({"q": {"type": "string", "$ref": "https://schemas.example.com/q"}}, verified=False),
    ),
    # shape
    ("invalid_tool", order_status(effect="escalation")),
    ("invalid_tool", order_status(description="")),
    ("invalid_tool", order_status(extra=1)),
    ("invalid_tool", with_config(method="TRACE")),
    ("invalid_tool", with_config(timeout_ms="8000")),
]


@pytest.mark.parametrize(("code", "tool"), HOSTILE, ids=[f"{i}-{c}" for i, (c, _) in enumerate(HOSTILE)])
@pytest.mark.django_db
def test_hostile_definitions_are_refused_with_their_code(api, code, tool):
    response = api.post("/v1/tools", tool, format="json")
    assert response.status_code == 422, response.json()
    assert error(response) == code, response.json()
    details = response.json()["error"]["details"]
    assert details and all(d["path"].startswith("$") for d in details)
    assert HttpTool.objects.count() == 0


@pytest.mark.django_db
def test_secret_only_to_its_allowed_hosts(api):
    assert (
        api.put(
            "/v1/secrets/ORDERS_TOKEN",
            {"value": "tok-0123456789abcdef", "allowed_hosts": ["other.example.com"]},
            format="json",
        ).status_code
        == 201
    )
    response = api.post("/v1/tools", order_status(), format="json")
    assert response.status_code == 422
    assert error(response) == "secret_host_not_allowed"
    api.put(
        "/v1/secrets/ORDERS_TOKEN",
        {"value": "tok-0123456789abcdef", "allowed_hosts": ["api.example.com"]},
        format="json",
    )
    assert api.post("/v1/tools", order_status(), format="json").status_code == 201


@pytest.mark.django_db
def test_duplicate_name_is_409(api):
    assert api.post("/v1/tools", order_status(), format="json").status_code == 201
    response = api.post("/v1/tools", order_status(), format="json")
    assert response.status_code == 409
    assert error(response) == "tool_already_exists"


@pytest.mark.django_db
def test_patch_validates_the_whole_result_and_a_refused_patch_changes_nothing(api):
    created = api.post("/v1/tools", order_status(), format="json").json()
    response = api.patch("/v1/tools/order_status", {"config": {"headers": {"Host": "evil.com"}}}, format="json")
    assert response.status_code == 422 and error(response) == "forbidden_header"
    response = api.patch("/v1/tools/order_status", {"requires_verified_user": False}, format="json")
    assert response.status_code == 422 and error(response) == "end_user_requires_verified_user"
    assert api.get("/v1/tools/order_status").json() == created
    response = api.patch("/v1/tools/order_status", {"config": {"timeout_ms": 5000}}, format="json")
    assert response.status_code == 200
    assert response.json()["config"]["timeout_ms"] == 5000
    assert response.json()["config"]["url"] == created["config"]["url"]
    response = api.patch("/v1/tools/order_status", {"name": "renamed"}, format="json")
    assert response.status_code == 422


@pytest.mark.django_db
def test_delete_refused_while_a_draft_grants_the_tool(api):
    api.post("/v1/tools", order_status(), format="json")
    agent = api.post(
        "/v1/agents", {"name": "A", "config": {"tools": {"http": [{"tool": "order_status"}]}}}, format="json"
    ).json()
    response = api.delete("/v1/tools/order_status")
    assert response.status_code == 409 and error(response) == "tool_in_use"
    api.patch(f"/v1/agents/{agent['id']}", {"config": {"tools": {"http": []}}}, format="json")
    assert api.delete("/v1/tools/order_status").status_code == 200
    assert api.get("/v1/tools/order_status").status_code == 404


@pytest.mark.django_db
def test_someone_elses_tools_are_404(alice, bob):
    alice.client().post("/v1/tools", order_status(), format="json")
    other = bob.client()
    for method, body in (("get", None), ("patch", {"description": "mine now"}), ("delete", None)):
        response = getattr(other, method)("/v1/tools/order_status", body, format="json")
        assert response.status_code == 404, method
        assert error(response) == "not_found"
    assert other.get("/v1/tools").json()["data"] == []
    # bob may have his own tool of the same name
    assert other.post("/v1/tools", order_status(), format="json").status_code == 201
    assert alice.client().get("/v1/tools/order_status").json()["description"] == order_status()["description"]


def test_hostile_corpus_is_large_and_unique():
    assert len(HOSTILE) >= 60
    seen = [repr(copy.deepcopy(t)) for _, t in HOSTILE]
    assert len(set(seen)) == len(seen)
