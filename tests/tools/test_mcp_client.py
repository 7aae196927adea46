"""The MCP client against a real MCP server on loopback TLS (fakes/mcp.py, served by the `upstream` fixture), through
the hardened outbound client: listing, calling, signing, sessions, and hostile servers."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from fakes.upstream import Upstream
from kagent.models import EgressEvent
from tests.plugins.egress import SIGNING_SECRET_NEW, SIGNING_SECRET_OLD
from tools.mcp_client import MAX_PAGES, MAX_TOOLS, McpServer, call_tool, list_tools
from tools.mcp_jsonrpc import PROTOCOL_VERSION, McpError, sse_event_data

pytestmark = pytest.mark.django_db

BASE = "https://tools.test:8443"
SECRETS = [SIGNING_SECRET_NEW, SIGNING_SECRET_OLD]
SCHEMA = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}
TOKEN = "mcp_tok_0123456789abcdef"


def tools(count: int) -> list[dict[str, Any]]:
    return [{"name": f"tool_{i}", "description": f"Tool number {i}.", "inputSchema": SCHEMA} for i in range(count)]


def server(path: str, **kwargs: Any) -> McpServer:
    return McpServer(url=BASE + path, **kwargs)


def listing(path: str, **kwargs: Any):
    params: dict[str, Any] = {"project_id": None, "signing_secrets": SECRETS, "message_id": "mcpl_1"}
    params.update(kwargs)
    return list_tools(server=params.pop("server", None) or server(path), **params)


def calling(path: str, name: str = "tool_0", arguments: dict[str, Any] | None = None, **kwargs: Any):
    params: dict[str, Any] = {"project_id": None, "signing_secrets": SECRETS, "call_id": "call_m1"}
    params.update(kwargs)
    return call_tool(
        server=params.pop("server", None) or server(path),
        name=name,
        arguments={"order": "8812"} if arguments is None else arguments,
        **params,
    )


def methods(upstream: Upstream) -> list[str]:
    return [m.message.get("method") for m in upstream.mcp.messages]


# --- listing ----------------------------------------------------------------------------------------------------


def test_listing_in_json_mode_is_signed_keeps_the_session_and_is_logged(egress_settings, upstream: Upstream):
    path = upstream.mcp.serve("orders", tools=tools(3))
    result = listing(path, server=server(path, headers={"Authorization": f"Bearer {TOKEN}"}, secret_values=(TOKEN,)))
    assert result.tools == [
        {"name": f"tool_{i}", "description": f"Tool number {i}.", "input_schema": SCHEMA} for i in range(3)
    ]
    assert not result.truncated and result.protocol_version == PROTOCOL_VERSION
    assert methods(upstream) == ["initialize", "notifications/initialized", "tools/list"]
    initialize, initialized, listed = upstream.mcp.messages
    assert initialize.session_id is None and initialize.protocol_version is None
    assert initialize.message["params"]["protocolVersion"] == PROTOCOL_VERSION
    [session] = upstream.mcp.opened
    assert initialized.session_id == listed.session_id == session  # kept and sent back
    assert upstream.mcp.closed == [session]  # and the session ended when the listing was done
    assert initialized.protocol_version == listed.protocol_version == PROTOCOL_VERSION
    assert all(m.accept == "application/json, text/event-stream" for m in upstream.mcp.messages)
    assert all(m.content_type == "application/json" for m in upstream.mcp.messages)
    # Every request signed (verified by the server with each secret of the rotation), each under its own id.
    assert [r.signature_valid for r in upstream.received] == [[True, True]] * 4
    assert [r.headers["webhook-id"] for r in upstream.received] == [
        "mcpl_1.initialize",
        "mcpl_1.initialized",
        "mcpl_1.list.1",
        "mcpl_1.close",
    ]
    assert {r.headers["user-agent"] for r in upstream.received} == {"K-Agent/1"}
    assert {r.headers["authorization"] for r in upstream.received} == {f"Bearer {TOKEN}"}
    events = list(EgressEvent.objects.order_by("created_at", "id"))
    assert [(e.purpose, e.decision, e.method, e.host, e.path, e.status) for e in events] == [
        ("mcp", "allowed", "POST", "tools.test", "/mcp/orders", 200),
        ("mcp", "allowed", "POST", "tools.test", "/mcp/orders", 202),
        ("mcp", "allowed", "POST", "tools.test", "/mcp/orders", 200),
        ("mcp", "allowed", "DELETE", "tools.test", "/mcp/orders", 200),
    ]


def test_listing_in_sse_mode_follows_the_cursor(egress_settings, upstream):
    path = upstream.mcp.serve("pages", tools=tools(7), mode="sse", page_size=3)
    result = listing(path)
    assert [tool["name"] for tool in result.tools] == [f"tool_{i}" for i in range(7)]
    assert not result.truncated
    lists = [m for m in upstream.mcp.messages if m.message.get("method") == "tools/list"]
    assert [m.message["params"].get("cursor") for m in lists] == [None, "3", "6"]
    assert len({m.session_id for m in upstream.mcp.messages[1:]}) == 1
    assert [r.headers["webhook-id"] for r in upstream.received][2:] == [
        "mcpl_1.list.1",
        "mcpl_1.list.2",
        "mcpl_1.list.3",
        "mcpl_1.close",
    ]
    assert EgressEvent.objects.count() == 6


def test_a_server_without_sessions_and_an_older_protocol_version(egress_settings, upstream):
    path = upstream.mcp.serve("plain", tools=tools(1), session=False, protocol_version="2025-06-18")
    result = listing(path)
    assert result.protocol_version == "2025-06-18" and len(result.tools) == 1
    assert {m.session_id for m in upstream.mcp.messages} == {None}
    assert [m.protocol_version for m in upstream.mcp.messages] == [None, "2025-06-18", "2025-06-18"]
    assert [r.method for r in upstream.received] == ["POST"] * 3  # no session to end


def test_a_protocol_version_not_supported_is_refused(egress_settings, upstream):
    path = upstream.mcp.serve("old", tools=tools(1), protocol_version="2024-11-05")
    with pytest.raises(McpError) as caught:
        listing(path)
    assert caught.value.code == "mcp_unsupported_version"
    assert methods(upstream) == ["initialize"]


def test_a_listing_of_thousands_of_tools_is_capped(egress_settings, upstream):
    path = upstream.mcp.serve("many", tools=tools(5000))
    result = listing(path)
    assert len(result.tools) == MAX_TOOLS and result.truncated
    assert result.tools[-1]["name"] == f"tool_{MAX_TOOLS - 1}"


def test_a_listing_of_endless_pages_stops_after_the_page_limit(egress_settings, upstream):
    path = upstream.mcp.serve("paged", tools=tools(100), page_size=2, mode="sse")
    result = listing(path)
    assert len(result.tools) == 2 * MAX_PAGES and result.truncated
    assert methods(upstream).count("tools/list") == MAX_PAGES


def test_exactly_the_cap_is_not_truncated(egress_settings, upstream):
    path = upstream.mcp.serve("exact", tools=tools(MAX_TOOLS), page_size=100)
    result = listing(path)
    assert len(result.tools) == MAX_TOOLS and not result.truncated


@pytest.mark.parametrize(
    "listed",
    [
        [{"description": "no name", "inputSchema": SCHEMA}],
        [{"name": "x", "description": "no schema"}],
        [{"name": "x", "description": 7, "inputSchema": SCHEMA}],
        ["a string"],
        [{"name": "twice", "inputSchema": SCHEMA}, {"name": "twice", "inputSchema": SCHEMA}],
    ],
)
def test_malformed_listings_are_protocol_errors(egress_settings, upstream, listed):
    path = upstream.mcp.serve("bad", tools=listed)
    with pytest.raises(McpError) as caught:
        listing(path)
    assert caught.value.code == "mcp_protocol_error"
    assert caught.value.message == "the MCP server's answer is not MCP over Streamable HTTP (JSON-RPC 2.0)"


# --- calling ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["json", "sse"])
def test_a_call_returns_its_text_and_structured_content(egress_settings, upstream, mode):
    path = upstream.mcp.serve("calls", tools=tools(2), mode=mode)
    result = calling(path, "tool_1", {"order": "8812"})
    assert result.texts == ['{"order": "8812"}']
    assert result.structured_content == {"echo": {"order": "8812"}}
    assert not result.is_error and result.other_parts == 0
    assert methods(upstream) == ["initialize", "notifications/initialized", "tools/call"]
    call = upstream.mcp.messages[-1]
    assert call.message["params"] == {"name": "tool_1", "arguments": {"order": "8812"}}
    assert [call.session_id] == upstream.mcp.opened == upstream.mcp.closed
    assert call.protocol_version == PROTOCOL_VERSION
    # The call itself goes under the tool call's id (a retry is the same call to the business), signed.
    assert [r.headers["webhook-id"] for r in upstream.received] == [
        "call_m1.initialize",
        "call_m1.initialized",
        "call_m1",
        "call_m1.close",
    ]
    assert all(r.signature_valid == [True, True] for r in upstream.received)
    assert EgressEvent.objects.filter(purpose="mcp", decision="allowed").count() == 4


def test_a_tool_that_failed_says_so_and_other_parts_are_counted(egress_settings, upstream):
    failed = {
        "content": [
            {"type": "text", "text": "Order 8812 not found."},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "text", "text": "Try another number."},
        ],
        "isError": True,
    }
    path = upstream.mcp.serve("fails", tools=tools(1), results={"tool_0": failed})
    result = calling(path)
    assert result.is_error and result.texts == ["Order 8812 not found.", "Try another number."]
    assert result.other_parts == 1 and result.structured_content is None


def test_a_json_rpc_error_is_an_mcp_error_with_its_detail(egress_settings, upstream):
    path = upstream.mcp.serve("errs", tools=tools(1), hostile={"tools/call": "error"})
    with pytest.raises(McpError) as caught:
        calling(path)
    error = caught.value
    assert (error.code, error.rpc_code, error.detail) == ("mcp_error", -32602, "Unknown tool: invalid_tool_name")
    assert error.message == "the MCP server answered the request with an error (JSON-RPC error -32602)"
    assert error.may_have_reached_upstream


def test_an_unknown_tool_is_the_servers_error(egress_settings, upstream):
    path = upstream.mcp.serve("unknown", tools=tools(1), mode="sse")
    with pytest.raises(McpError) as caught:
        calling(path, "nope")
    assert caught.value.code == "mcp_error" and caught.value.detail == "Unknown tool: nope"


@pytest.mark.parametrize(
    "result",
    [
        {"content": "text"},
        {"content": [{"text": "no type"}]},
        {"content": [{"type": "text", "text": 5}]},
        {"content": [], "isError": "yes"},
    ],
)
def test_a_malformed_call_result_is_a_protocol_error_that_may_have_had_its_effect(egress_settings, upstream, result):
    path = upstream.mcp.serve("weird", tools=tools(1), results={"tool_0": result})
    with pytest.raises(McpError) as caught:
        calling(path)
    assert caught.value.code == "mcp_protocol_error" and caught.value.may_have_reached_upstream


def test_secrets_are_masked_in_the_egress_log_and_in_an_error_detail(egress_settings, upstream):
    path = upstream.mcp.serve("masked", tools=tools(1))
    secret_server = server(f"{path}/{TOKEN}", secret_values=(TOKEN,))
    with pytest.raises(McpError) as caught:
        calling("", name=f"echo {TOKEN}", server=secret_server)
    assert caught.value.code == "mcp_error" and TOKEN not in caught.value.detail
    assert caught.value.detail.startswith("Unknown tool: echo ") and TOKEN not in str(caught.value)
    assert upstream.received[0].path == f"{path}/{TOKEN}"
    assert EgressEvent.objects.count() == 4
    assert not EgressEvent.objects.filter(path__contains=TOKEN).exists()


def test_before_send_is_called_once_before_anything_is_sent(egress_settings, upstream):
    path = upstream.mcp.serve("hook", tools=tools(1))
    seen: list[int] = []
    result = calling(path, before_send=lambda: seen.append(len(upstream.received)))
    assert seen == [0] and result.texts and len(upstream.received) == 4


# --- hostile servers and refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["internal.test", "private.test", "127.0.0.1", "mapped.test"])
def test_a_server_at_a_denied_address_is_never_reached(egress_settings, upstream, internal, host):
    with pytest.raises(McpError) as caught:
        listing("", server=McpServer(url=f"https://{host}:8443/mcp/orders"))
    error = caught.value
    assert error.code == "address_not_allowed" and not error.may_have_reached_upstream
    assert "127.0.0.1" not in error.message and "10.0.0.5" not in error.message
    assert upstream.received == []  # and the internal sentinel saw nothing (its fixture checks)
    event = EgressEvent.objects.get()
    assert (event.purpose, event.decision, event.code, event.host) == ("mcp", "refused", "address_not_allowed", host)


def test_a_plain_http_server_is_refused(egress_settings, upstream):
    with pytest.raises(McpError) as caught:
        listing("", server=McpServer(url="http://tools.test:8443/mcp/orders"))
    assert caught.value.code == "url_not_allowed"
    assert upstream.received == []


def test_a_redirect_is_not_followed(egress_settings, upstream, internal):
    path = upstream.mcp.serve("moves", tools=tools(1), hostile={"initialize": "redirect"})
    with pytest.raises(McpError) as caught:
        listing(path)
    assert caught.value.code == "redirect_not_followed" and caught.value.status == 302
    assert methods(upstream) == ["initialize"]
    assert EgressEvent.objects.get().code == "redirect_not_followed"


@pytest.mark.parametrize("mode", ["json", "sse"])
def test_an_answer_over_one_mib_is_refused(egress_settings, upstream, mode):
    path = upstream.mcp.serve("big", tools=tools(1), mode=mode, hostile={"tools/list": "huge"})
    with pytest.raises(McpError) as caught:
        listing(path)
    assert caught.value.code == "response_too_large"
    assert EgressEvent.objects.filter(code="response_too_large").count() == 1
    assert upstream.mcp.closed == upstream.mcp.opened  # the session still ended


def test_an_endless_stream_ends_by_the_deadline(egress_settings, upstream):
    path = upstream.mcp.serve("forever", tools=tools(1), mode="sse", hostile={"tools/call": "endless"})
    started = time.monotonic()
    with pytest.raises(McpError) as caught:
        calling(path, timeout_ms=1500)
    elapsed = time.monotonic() - started
    assert caught.value.code == "timeout" and caught.value.may_have_reached_upstream
    assert caught.value.message == "the MCP server did not answer in time"
    assert 1.0 < elapsed < 4.0
    assert EgressEvent.objects.order_by("-created_at", "-id").first().code == "timeout"


@pytest.mark.parametrize(
    ("hostile", "mode"),
    [("garbage", "json"), ("html", "json"), ("wrong_id", "json"), ("wrong_id", "sse"), ("garbage", "sse")],
)
def test_protocol_garbage_is_a_protocol_error(egress_settings, upstream, hostile, mode):
    path = upstream.mcp.serve("junk", tools=tools(1), mode=mode, hostile={"tools/list": hostile})
    with pytest.raises(McpError) as caught:
        listing(path)
    assert caught.value.code == "mcp_protocol_error" and caught.value.status == 200


def test_an_http_error_status_is_upstream_status(egress_settings, upstream):
    path = upstream.mcp.serve("down", tools=tools(1), hostile={"initialize": "status"})
    with pytest.raises(McpError) as caught:
        listing(path)
    assert (caught.value.code, caught.value.status) == ("upstream_status", 500)


def test_an_unsigned_call_is_never_sent(egress_settings, upstream):
    path = upstream.mcp.serve("unsigned", tools=tools(1))
    with pytest.raises(McpError) as caught:
        calling(path, signing_secrets=[])
    assert caught.value.code == "no_signing_secret"
    assert upstream.received == [] and not EgressEvent.objects.exists()


@pytest.mark.parametrize("name", ["Mcp-Session-Id", "accept", "Webhook-Signature", "Host", "User-Agent"])
def test_a_configured_header_may_not_set_what_k_agent_sets(egress_settings, upstream, name):
    path = upstream.mcp.serve("headers", tools=tools(1))
    with pytest.raises(McpError) as caught:
        listing(path, server=server(path, headers={name: "x"}))
    assert caught.value.code == "header_not_allowed"
    assert upstream.received == []


def test_the_session_budget_covers_every_request(egress_settings, upstream):
    path = upstream.mcp.serve("slow", tools=tools(1))
    with pytest.raises(McpError) as caught:
        listing(path, timeout_ms=1)
    assert caught.value.code == "timeout"


# --- the event stream parser ------------------------------------------------------------------------------------


def test_event_stream_parsing_follows_the_standard():
    stream = (
        b"\xef\xbb\xbfid: 0\r\ndata:\r\n\r\n"  # BOM, then a priming event: empty data, not dispatched
        b": a comment\n\n"
        b'event: message\rdata: {"a":\rdata:  1}\r\r'  # CR line ends; a second data line joined with a newline
        b"event: other\ndata: {}\n\n"  # another event type: not a message
        b'retry: 10\ndata:{"b":2}\n\n'  # no space after the colon
        b'data: {"c": 3}\n'  # the stream ends in the middle of this event: not dispatched
    )
    assert list(sse_event_data(stream)) == ['{"a":\n 1}', '{"b":2}']


def test_event_stream_parsing_is_linear_on_hostile_streams():
    for stream in (b"\r" * (1024 * 1024), b"data:" * 200_000 + b"\n\n", b"data: x\n" * 130_000 + b"\n", b":" * 10**6):
        started = time.monotonic()
        list(sse_event_data(stream))
        assert time.monotonic() - started < 1.0


def test_an_event_stream_that_is_not_utf8_is_a_protocol_error():
    with pytest.raises(McpError) as caught:
        list(sse_event_data(b"data: \xff\n\n"))
    assert caught.value.code == "mcp_protocol_error"


def test_a_deeply_nested_message_is_a_protocol_error(egress_settings, upstream):
    # A server answering initialize with a message nested past the JSON parser's depth.
    deep = "[" * 100_000 + "]" * 100_000
    path = upstream.respond("deep", body=deep.encode(), headers={"Content-Type": "application/json"})
    with pytest.raises(McpError) as caught:
        listing(path)
    assert caught.value.code == "mcp_protocol_error"
    assert json.loads(upstream.received[0].body)["method"] == "initialize"
