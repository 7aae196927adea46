"""Tenant JSON Schemas against model arguments (issue #13, finding 2): every regex keyword bounded, nothing fetched
by `$ref`, no format regex, and the policy check refusing what can't be checked."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.tools.test_policy import context
from tools import arguments
from tools.arguments import UncheckableArguments, argument_errors
from tools.policy import PolicyContext, policy_check
from tools.schema_bounds import tenant_schema_problem
from tools.template_values import TemplateError
from tools.templating import render_request
from tools.toolset import ToolSpec

# Catastrophic in Python's re (the case: 6.4 s at 26 characters, doubling per character), and one that is
# catastrophic in the regex module too, so the time limit itself is exercised.
SLOW_PATTERNS = ["^(a+)+$", "(a|aa)+$"]
SLOW_KEY = "a" * 40 + "!"


def ctx_for(parameters: dict[str, Any]) -> PolicyContext:
    spec = {"name": "lookup", "kind": "client", "effect": "read", "description": "x", "parameters": parameters}
    return context(tool_set=(ToolSpec.from_dict(spec),))


def timed_policy_check(parameters: dict[str, Any], args: dict[str, Any]) -> Any:
    started = time.monotonic()
    decision = policy_check(ctx_for(parameters), "lookup", json.dumps(args))
    assert time.monotonic() - started < 2
    return decision


@pytest.mark.parametrize("pattern", SLOW_PATTERNS)
def test_pattern_properties_run_with_a_time_limit(pattern):
    decision = timed_policy_check({"type": "object", "patternProperties": {pattern: {}}}, {SLOW_KEY: 1})
    assert (decision.allowed, decision.code) == (False, "invalid_arguments")


@pytest.mark.parametrize("pattern", SLOW_PATTERNS)
def test_additional_properties_asks_the_patterns_with_a_time_limit(pattern):
    # additionalProperties: false makes jsonschema ask every patternProperties pattern about every extra name.
    parameters = {"type": "object", "patternProperties": {pattern: {}}, "additionalProperties": False}
    decision = timed_policy_check(parameters, {SLOW_KEY: 1})
    assert (decision.allowed, decision.code) == (False, "invalid_arguments")


def test_many_keys_share_one_budget():
    # A thousand keys, each just under the per-pattern limit, still end within the whole check's budget.
    parameters = {"type": "object", "patternProperties": {"(a|aa)+$": {}}}
    decision = timed_policy_check(parameters, {f"{'a' * 30}!{n}": n for n in range(1000)})
    assert decision.code == "invalid_arguments"


@pytest.mark.parametrize("pattern", SLOW_PATTERNS)
def test_a_pattern_inside_property_names_is_bounded(pattern):
    decision = timed_policy_check({"type": "object", "propertyNames": {"pattern": pattern}}, {SLOW_KEY: 1})
    assert decision.code == "invalid_arguments"


def test_unevaluated_properties_next_to_pattern_properties_is_refused_not_run():
    parameters = {"type": "object", "patternProperties": {"^(a+)+$": {}}, "unevaluatedProperties": False}
    decision = timed_policy_check(parameters, {SLOW_KEY: 1})
    assert decision.code == "invalid_arguments"
    assert tenant_schema_problem(parameters) is not None


def test_the_patterns_still_decide_when_they_answer_in_time():
    parameters = {
        "type": "object",
        "patternProperties": {"^x_[0-9]+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert timed_policy_check(parameters, {"x_1": 5}).allowed
    assert timed_policy_check(parameters, {"x_1": "five"}).code == "invalid_arguments"
    assert timed_policy_check(parameters, {"y": 5}).code == "invalid_arguments"


def test_format_is_an_annotation_only():
    # No format checker: no format regex (email, hostname, regex…) ever runs on an argument.
    assert argument_errors({"type": "string", "format": "email"}, "not an email") == []
    assert argument_errors({"type": "string", "format": "regex"}, "(a+)+(") == []


@pytest.fixture
def internal_http() -> Iterator[tuple[str, list[str]]]:
    """A plain HTTP server standing for anything on our network; it records every path asked for."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"enum": ["internal-secret-value"]}')

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", hits
    server.shutdown()
    server.server_close()


def test_a_ref_to_a_url_is_never_fetched(internal_http):
    url, hits = internal_http
    parameters = {"type": "object", "properties": {"a": {"$ref": f"{url}/latest/meta-data"}}}
    decision = timed_policy_check(parameters, {"a": "x"})
    assert decision.code == "invalid_arguments" and "internal-secret-value" not in decision.guidance
    with pytest.raises(UncheckableArguments):
        argument_errors({"$id": f"{url}/root", "$ref": "other"}, {})
    assert hits == []
    assert tenant_schema_problem(parameters) is not None


def test_a_ref_inside_the_schema_still_works():
    schema = {"$defs": {"code": {"type": "string", "maxLength": 3}}, "properties": {"c": {"$ref": "#/$defs/code"}}}
    assert argument_errors(schema, {"c": "abc"}) == []
    assert len(argument_errors(schema, {"c": "abcd"})) == 1
    assert tenant_schema_problem(schema) is None
    with pytest.raises(UncheckableArguments):
        argument_errors({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, {})


def test_render_time_uses_the_same_bounded_check(internal_http):
    url, hits = internal_http
    tool = {
        "name": "lookup",
        "config": {
            "method": "GET",
            "url": "https://api.example.com/orders/{{args.order}}",
            "parameters": {
                "type": "object",
                "properties": {"order": {"type": "string", "$ref": f"{url}/x"}},
                "patternProperties": {"(a|aa)+$": {}},
            },
        },
    }
    started = time.monotonic()
    with pytest.raises(TemplateError):
        render_request(
            tool=tool,
            arguments={"order": "1", SLOW_KEY: 1},
            end_user=None,
            variables={},
            secret_lookup=lambda name: None,
        )
    assert time.monotonic() - started < 2
    assert hits == []


def test_the_budget_is_the_whole_check(monkeypatch):
    monkeypatch.setattr(arguments, "CHECK_BUDGET_S", 0.0)
    with pytest.raises(UncheckableArguments):
        argument_errors({"type": "string", "pattern": "^a$"}, "a")
