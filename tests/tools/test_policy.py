"""The policy check as a pure function (seed, "The policy check"; SPEC §5's table). The refusals as a run sees them,
through the engine, are in tests/runs/test_policy_refusals.py."""

from __future__ import annotations

import json
import time

from django.utils import timezone

from tools.policy import PolicyContext, policy_check
from tools.toolset import ToolSpec


def test_verified_user_required_for_a_client_tool_flagged_so():
    # The only tools that need a verified user are HTTP tools (tests/runs/test_http_tools.py covers those too).
    spec = {
        "name": "order_status",
        "kind": "http",
        "effect": "read",
        "requires_verified_user": True,
        "parameters": {"type": "object", "properties": {"n": {"type": "string"}}, "additionalProperties": False},
        "description": "x",
    }
    ctx = PolicyContext(
        tools_enabled=True,
        tool_set=(ToolSpec.from_dict(spec),),
        verified=False,
        has_session=True,
        actions_paused=lambda: False,
        business_hours=None,
        now=timezone.now(),
        round=1,
        max_rounds=3,
        index_in_round=0,
        cancelled=False,
        succeeded=frozenset(),
    )
    decision = policy_check(ctx, "order_status", '{"n": "8812"}')
    assert (decision.allowed, decision.code) == (False, "verified_user_required")
    assert "sign in" in decision.guidance


def test_a_catastrophic_tenant_pattern_cannot_hold_the_worker():
    spec = {
        "name": "lookup",
        "kind": "client",
        "effect": "read",
        "requires_verified_user": False,
        "description": "x",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}},
            "additionalProperties": False,
        },
    }
    ctx = PolicyContext(
        tools_enabled=True,
        tool_set=(ToolSpec.from_dict(spec),),
        verified=False,
        has_session=True,
        actions_paused=lambda: False,
        business_hours=None,
        now=timezone.now(),
        round=1,
        max_rounds=3,
        index_in_round=0,
        cancelled=False,
        succeeded=frozenset(),
    )
    started = time.monotonic()
    decision = policy_check(ctx, "lookup", json.dumps({"code": "a" * 40 + "!"}))
    assert time.monotonic() - started < 2
    assert decision.code == "invalid_arguments"
    assert policy_check(ctx, "lookup", json.dumps({"code": "aaa"})).allowed
