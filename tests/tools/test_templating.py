"""Request templating: fail-closed, escaped per location, formats, secrets only to their hosts."""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.examples import SEED_ORDER_STATUS
from tools.template_values import EndUserIdentity, SecretValue, TemplateError
from tools.templating import render_preview, render_request

ORDERS_TOKEN = "tok_live_9f8e7d6c5b4a3210"

SEED_TOOL: dict[str, Any] = SEED_ORDER_STATUS

SECRETS = {
    "ORDERS_TOKEN": SecretValue(ORDERS_TOKEN, ("api.example.com",)),
    "OTHER_HOST_TOKEN": SecretValue("other-host-secret-value", ("billing.example.com",)),
    "CRLF": SecretValue("abc\r\nX-Injected: 1", ("api.example.com",)),
    "BLANK": SecretValue("   ", ("api.example.com",)),
    "SLASHY": SecretValue("a/b?c#d%e", ("api.example.com",)),
}
USER = EndUserIdentity(external_id="cus_42", traits={"tier": "gold", "store": 7, "empty": "", "nested": {"a": 1}})


def lookup(name: str) -> SecretValue | None:
    return SECRETS.get(name)


def tool_with(**config: Any) -> dict[str, Any]:
    tool = copy.deepcopy(SEED_TOOL)
    tool["config"].update(config)
    return tool


def render(tool: dict[str, Any] | None = None, arguments: dict[str, Any] | None = None, **kwargs: Any):
    params: dict[str, Any] = {
        "tool": tool or SEED_TOOL,
        "arguments": {"order_number": "8812"} if arguments is None else arguments,
        "end_user": USER,
        "variables": {"store_id": "riyadh-1", "blank": " ", "crlf": "a\nb"},
        "secret_lookup": lookup,
    }
    params.update(kwargs)
    return render_request(**params)


def refused(*args: Any, **kwargs: Any) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        render(*args, **kwargs)
    return info.value


BODY_PARAMS = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string"},
        "note": {"type": "string", "x-kagent-format": "text"},
        "quantity": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["order_number"],
    "additionalProperties": False,
}


def body_tool(body: Any, **config: Any) -> dict[str, Any]:
    return tool_with(method="POST", url="https://api.example.com/orders", parameters=BODY_PARAMS, body=body, **config)


# --- the seed example -------------------------------------------------------------------------------------------


def test_seed_example_renders():
    rendered = render()
    assert rendered.method == "GET"
    assert rendered.url == "https://api.example.com/customers/cus_42/orders/8812"
    assert rendered.headers == {"Authorization": f"Bearer {ORDERS_TOKEN}"}
    assert rendered.body is None
    assert rendered.timeout_ms == 8000
    assert (rendered.host, rendered.port, rendered.path) == ("api.example.com", 443, "/customers/cus_42/orders/8812")
    assert rendered.secret_values == (ORDERS_TOKEN,)


def test_arabic_indic_digits_become_ascii():
    assert render(arguments={"order_number": "٨٨١٢"}).url.endswith("/orders/8812")
    assert render(arguments={"order_number": "۸۸۱۲"}).url.endswith("/orders/8812")  # extended (Persian)


def test_arabic_digits_are_converted_before_schema_checks():
    params = {**SEED_TOOL["config"]["parameters"]}
    params["properties"] = {"order_number": {"type": "string", "pattern": "^[0-9]{4}$"}}
    assert render(tool_with(parameters=params), {"order_number": "٨٨١٢"}).url.endswith("/8812")


# --- fail-closed ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({}, "invalid_arguments"),  # required by the schema
        ({"order_number": ""}, "blank_placeholder"),
        ({"order_number": "   "}, "blank_placeholder"),
        ({"order_number": None}, "invalid_arguments"),  # schema: must be a string
        ({"order_number": 8812}, "invalid_arguments"),
        ({"order_number": "8812", "extra": "x"}, "invalid_arguments"),
    ],
)
def test_missing_or_blank_arguments_abort(arguments, code):
    assert refused(arguments=arguments).code == code


def test_unresolved_placeholders_abort():
    assert refused(end_user=None).code == "verified_user_required"
    missing_secret = tool_with(headers={"Authorization": "Bearer {{secret.NOPE}}"})
    assert refused(missing_secret).code == "unresolved_placeholder"
    missing_var = tool_with(url="https://api.example.com/s/{{var.nope}}/{{args.order_number}}")
    assert refused(missing_var).code == "unresolved_placeholder"
    missing_trait = tool_with(url="https://api.example.com/t/{{end_user.traits.nope}}/{{args.order_number}}")
    assert refused(missing_trait).code == "unresolved_placeholder"
    undeclared = tool_with(url="https://api.example.com/x/{{args.ghost}}")
    assert refused(undeclared).code == "invalid_template"


def test_blank_values_abort():
    assert refused(tool_with(url="https://api.example.com/{{var.blank}}/{{args.order_number}}")).code == (
        "blank_placeholder"
    )
    assert refused(tool_with(headers={"X-Key": "{{secret.BLANK}}"})).code == "blank_placeholder"
    trait = tool_with(url="https://api.example.com/t/{{end_user.traits.empty}}/{{args.order_number}}")
    assert refused(trait).code == "blank_placeholder"


def test_end_user_values_come_only_from_the_identity_passed_in():
    # An argument named like the identity never fills {{end_user.*}}.
    params = {"type": "object", "properties": {"order_number": {"type": "string"}, "external_id": {"type": "string"}}}
    tool = tool_with(parameters=params)
    rendered = render(tool, {"order_number": "1", "external_id": "cus_attacker"})
    assert "/customers/cus_42/" in rendered.url
    assert refused(tool, {"order_number": "1", "external_id": "cus_attacker"}, end_user=None).code == (
        "verified_user_required"
    )


def test_a_trait_named_external_id_is_a_trait():
    user = EndUserIdentity(external_id="cus_42", traits={"external_id": "legacy-7"})
    tool = tool_with(url="https://api.example.com/{{end_user.traits.external_id}}/{{end_user.external_id}}")
    assert render(tool, end_user=user).url == "https://api.example.com/legacy-7/cus_42"


def test_missing_traits_mapping_is_unresolved_not_a_crash():
    user = EndUserIdentity(external_id="cus_42", traits=None)  # type: ignore[arg-type]
    tool = tool_with(url="https://api.example.com/{{end_user.traits.tier}}")
    assert refused(tool, end_user=user).code == "unresolved_placeholder"


def test_traits_and_variables():
    tool = tool_with(url="https://api.example.com/{{var.store_id}}/{{end_user.traits.tier}}/{{end_user.traits.store}}")
    assert render(tool).url == "https://api.example.com/riyadh-1/gold/7"
    nested = tool_with(url="https://api.example.com/{{end_user.traits.nested}}")
    assert refused(nested).code == "invalid_arguments"


# --- escaping per location ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["a/b", "a?b", "a#b", "a%2fb", "a\\b", "a\r\nb", "a&b=c", "x" * 65, "a\u202eb", ""])
def test_token_format_refuses_characters_outside_the_alphabet(value):
    assert refused(arguments={"order_number": value}).code in {"invalid_arguments", "blank_placeholder"}


@pytest.mark.parametrize("value", ["A-12", "order 8812", "a.b_c@d:e+f-g", "طلب", "x" * 64])
def test_token_format_allows_its_alphabet(value):
    rendered = render(arguments={"order_number": value})
    assert unquote(rendered.path.rsplit("/", 1)[1]) == value
    assert rendered.path.count("/") == 4


@pytest.mark.parametrize("value", [".", "..", "...."[:2]])
def test_dot_segments_after_substitution_are_refused(value):
    assert refused(arguments={"order_number": value}).code == "unsafe_path"


@pytest.mark.parametrize(
    "literal",
    [
        "/a/%2e%2e/{{args.order_number}}",
        "/a/%2E/{{args.order_number}}",
        "/a/%252e%252e/{{args.order_number}}",
        "/a/../{{args.order_number}}",
    ],
)
def test_dot_segments_in_the_template_are_refused(literal):
    assert refused(tool_with(url=f"https://api.example.com{literal}")).code == "unsafe_path"


@pytest.mark.parametrize(
    ("url", "value"),
    [
        ("https://api.example.com/orders/%2{{args.order_number}}", "f"),  # %2 + f = an encoded "/"
        ("https://api.example.com/orders/%{{args.order_number}}", "2f"),
        ("https://api.example.com/orders/a%{{args.order_number}}/x", "2e"),
        ("https://api.example.com/orders/{{args.order_number}}?q=%2{{args.order_number}}", "6"),
        ("https://api.example.com/orders/{{args.order_number}}/%", "1"),
        ("https://api.example.com/orders/%zz/{{args.order_number}}", "1"),
    ],
)
def test_a_lone_percent_is_refused_at_render_time_too(url, value):
    # Issue #13, finding 6: the rule was checked when a tool is written only, so a tool (or a published version)
    # stored before it still rendered %2{{args.x}} into %2F.
    error = refused(tool_with(url=url), {"order_number": value})
    assert error.code == "invalid_template" and "%" in error.message


def test_escapes_written_in_full_still_render():
    rendered = render(
        tool_with(url="https://api.example.com/a%20b/{{args.order_number}}?q=x%2Fy"), {"order_number": "7"}
    )
    assert rendered.url == "https://api.example.com/a%20b/7?q=x%2Fy"


def test_dot_inside_a_segment_is_fine():
    assert render(arguments={"order_number": "v1.2"}).url.endswith("/orders/v1.2")
    assert render(arguments={"order_number": "..."}).url.endswith("/orders/...")


def test_secret_in_path_is_one_segment():
    tool = tool_with(url="https://api.example.com/k/{{secret.SLASHY}}/x")
    rendered = render(tool)
    assert rendered.path == "/k/a%2Fb%3Fc%23d%25e/x"
    assert httpx.URL(rendered.url).query == b""


def test_query_values_are_escaped_and_keys_literal():
    tool = tool_with(url="https://api.example.com/search?q={{args.order_number}}&lang=ar")
    rendered = render(tool, {"order_number": "a b+c@d"})
    assert httpx.URL(rendered.url).params.multi_items() == [("q", "a b+c@d"), ("lang", "ar")]
    assert refused(tool_with(url="https://api.example.com/s?{{args.order_number}}=1")).code == "invalid_template"


def test_header_values_cannot_add_headers():
    assert refused(tool_with(headers={"X-Key": "{{secret.CRLF}}"})).code == "invalid_header_value"
    assert refused(tool_with(headers={"X-Store": "{{var.crlf}}"})).code == "invalid_header_value"
    tool = tool_with(headers={"X-Order": "{{args.order_number}}"})
    assert refused(tool, {"order_number": "1\r\nX-Evil: 1"}).code == "invalid_arguments"


@pytest.mark.parametrize(
    "name",
    [
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
        "proxy-connection",
        "User-Agent",
        "webhook-id",
        "Webhook-Signature",
        "webhook-timestamp",
    ],
)
def test_forbidden_headers(name):
    assert refused(tool_with(headers={name: "x"})).code == "forbidden_header"


def test_text_parameters_are_refused_in_url_and_headers():
    params = {"type": "object", "properties": {"order_number": {"type": "string", "x-kagent-format": "text"}}}
    assert refused(tool_with(parameters=params)).code == "invalid_template"
    headers_tool = tool_with(
        parameters=params, url="https://api.example.com/x", headers={"X-Note": "{{args.order_number}}"}
    )
    assert refused(headers_tool).code == "invalid_template"


# --- bodies -------------------------------------------------------------------------------------------------------


def test_body_exact_placeholder_takes_the_json_value_and_text_is_escaped():
    tool = body_tool(
        {
            "order": "{{args.order_number}}",
            "qty": "{{args.quantity}}",
            "items": "{{args.items}}",
            "summary": "Order {{args.order_number}}: {{args.note}}",
            "customer": "{{end_user.external_id}}",
            "literal": 5,
            "nested": {"store": "{{var.store_id}}", "list": ["{{args.order_number}}", "x"]},
        }
    )
    note = 'He said "hi"\nand left\u200b \u202egnp.exe'
    rendered = render(tool, {"order_number": "٨٨١٢", "quantity": 3, "items": ["a", "b"], "note": note})
    body = json.loads(rendered.body)
    assert body == {
        "order": "8812",
        "qty": 3,
        "items": ["a", "b"],
        "summary": 'Order 8812: He said "hi" and left gnp.exe',
        "customer": "cus_42",
        "literal": 5,
        "nested": {"store": "riyadh-1", "list": ["8812", "x"]},
    }
    assert rendered.headers["Content-Type"] == "application/json"
    assert rendered.method == "POST"


def test_body_values_cannot_add_keys():
    tool = body_tool({"note": "{{args.note}}", "n": "{{args.order_number}}"})
    rendered = render(tool, {"order_number": "1", "note": '", "admin": true, "x": "'})
    assert set(json.loads(rendered.body)) == {"note", "n"}


def test_body_keys_are_literal():
    assert refused(body_tool({"{{args.order_number}}": 1}), {"order_number": "1"}).code == "invalid_template"


def test_text_format_limits():
    tool = body_tool({"note": "{{args.note}}", "n": "{{args.order_number}}"})
    assert refused(tool, {"order_number": "1", "note": "x" * 1001}).code == "invalid_arguments"
    assert len(json.loads(render(tool, {"order_number": "1", "note": "x" * 1000}).body)["note"]) == 1000
    assert refused(tool, {"order_number": "1", "note": "\u200b\u200e\x00"}).code == "blank_placeholder"


def test_body_only_for_post_put_patch():
    assert refused(tool_with(body={"a": "b"})).code == "invalid_template"
    assert refused(tool_with(method="DELETE", body={"a": "b"})).code == "invalid_template"


# --- secrets ------------------------------------------------------------------------------------------------------


def test_secret_only_to_its_allowed_hosts():
    tool = tool_with(headers={"Authorization": "Bearer {{secret.OTHER_HOST_TOKEN}}"})
    assert refused(tool).code == "secret_host_not_allowed"
    in_body = body_tool({"k": "{{secret.OTHER_HOST_TOKEN}}", "n": "{{args.order_number}}"})
    assert refused(in_body).code == "secret_host_not_allowed"


def test_preview_masks_secrets_everywhere():
    tool = tool_with(
        method="POST",
        url="https://api.example.com/k/{{secret.ORDERS_TOKEN}}?t={{secret.ORDERS_TOKEN}}",
        body={"token": "{{secret.ORDERS_TOKEN}}", "text": "key={{secret.ORDERS_TOKEN}}"},
    )
    preview = render_preview(
        tool=tool, arguments={"order_number": "1"}, end_user=USER, variables={}, secret_lookup=lookup
    )
    dumped = json.dumps(preview, ensure_ascii=False)
    assert ORDERS_TOKEN not in dumped and ORDERS_TOKEN[:-4] not in dumped
    assert preview["headers"]["Authorization"] == "Bearer ••••3210"
    assert "••••3210" in preview["url"] and "••••3210" in preview["body"]


# --- URL templates -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://api.example.com/x",
        "https://{{args.order_number}}.example.com/x",
        "https://api.example.com{{args.order_number}}/x",
        "https://api.example.com:{{args.order_number}}/x",
        "https://api.example.com:8080/x",
        "https://api.example.com",
        "https://user@api.example.com/x",
        "https://127.0.0.1:8443@api.example.com/x",
        "https://api.example.com/x#{{args.order_number}}",
        "https://api.example.com/{{ args.order_number }}",
        "https://api.example.com/{{sys.x}}",
    ],
)
def test_url_templates_that_could_move_the_call_are_refused(url):
    assert refused(tool_with(url=url)).code in {"invalid_template", "unknown_placeholder"}


# --- property tests -----------------------------------------------------------------------------------------------

STRUCTURE_TOOL = tool_with(
    method="POST",
    url="https://api.example.com:8443/v1/{{args.a}}/items/{{args.b}}?x={{args.a}}&y=lit&z={{args.b}}",
    headers={"X-A": "pre-{{args.b}}", "X-B": "{{args.b}}"},
    parameters={
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "string"},
            "c": {"type": "string", "x-kagent-format": "text"},
        },
        "required": ["a", "b", "c"],
    },
    body={"a": "{{args.a}}", "c": "{{args.c}}", "mixed": "c={{args.c}}"},
)
TOKEN_ALPHABET = st.sampled_from(list("aZ09٣۷ طب._@:+-/?#%&=\\\r\n\t\x00\u202e\u200b\"'{}[]ا"))
ARGUMENT = st.one_of(st.text(), st.text(alphabet=TOKEN_ALPHABET, min_size=1, max_size=70))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=ARGUMENT, b=ARGUMENT, c=st.text(max_size=1200))
def test_arguments_never_change_the_request_structure(a: str, b: str, c: str):
    try:
        rendered = render(STRUCTURE_TOOL, {"a": a, "b": b, "c": c})
    except TemplateError as exc:
        assert exc.code in {"invalid_arguments", "blank_placeholder", "unsafe_path"}
        return
    url = httpx.URL(rendered.url)
    assert (url.scheme, url.host, url.port) == ("https", "api.example.com", 8443)
    segments = url.raw_path.split(b"?")[0].split(b"/")
    assert len(segments) == 5 and segments[1] == b"v1" and segments[3] == b"items"
    assert unquote(segments[2].decode()) == a.translate(str.maketrans("٣۷", "37"))
    assert [k for k, _ in url.params.multi_items()] == ["x", "y", "z"]
    assert list(rendered.headers) == ["X-A", "X-B", "Content-Type"]
    assert all("\r" not in v and "\n" not in v for v in rendered.headers.values())
    body = json.loads(rendered.body)
    assert set(body) == {"a", "c", "mixed"}
    assert all(ord(ch) >= 0x20 and ch not in "\u202e\u200b" for ch in body["c"])


VALID_TOKEN = st.text(alphabet=st.sampled_from(list("aZ09٣۷ طب._@:+-ا")), min_size=1, max_size=64).filter(
    lambda s: s.strip() and s not in (".", "..")
)


@settings(max_examples=300, deadline=None)
@given(
    a=VALID_TOKEN,
    b=VALID_TOKEN.filter(str.isascii),
    c=st.text(min_size=1, max_size=1000).filter(lambda s: any(ch.isalnum() for ch in s)),
)
def test_valid_arguments_always_render_with_the_same_structure(a: str, b: str, c: str):
    rendered = render(STRUCTURE_TOOL, {"a": a, "b": b, "c": c})  # must not raise
    url = httpx.URL(rendered.url)
    assert (url.scheme, url.host, url.port) == ("https", "api.example.com", 8443)
    segments = url.raw_path.split(b"?")[0].split(b"/")
    assert len(segments) == 5
    assert [unquote(segments[2].decode()), unquote(segments[4].decode())] == [
        a.translate(str.maketrans("٣۷", "37")),
        b.translate(str.maketrans("٣۷", "37")),
    ]
    assert url.params.multi_items() == [
        ("x", unquote(segments[2].decode())),
        ("y", "lit"),
        ("z", unquote(segments[4].decode())),
    ]
    assert rendered.headers["X-B"] == b.translate(str.maketrans("٣۷", "37"))


@pytest.mark.parametrize(
    ("header", "kwargs"),
    [
        ("{{var.store_lf}}", {"variables": {"store_lf": "riyadh-1\n"}}),
        ("{{end_user.traits.tier}}", {"end_user": EndUserIdentity("cus_42", {"tier": "gold\n"})}),
        ("{{secret.LF}}", {"secret_lookup": lambda n: SecretValue("tok_live\n", ("api.example.com",))}),
    ],
)
def test_a_header_value_ending_in_a_line_feed_is_refused(header, kwargs):
    assert refused(tool_with(headers={"X-Value": header}), **kwargs).code == "invalid_header_value"
