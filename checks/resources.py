"""How checks and check runs look in the API (their component names are older than this app: AgentCheck,
AgentCheckRun)."""

from __future__ import annotations

from checks.models import Check, CheckRun
from kagent.rendering import Const, Field, Resource, Timestamp, unix

CHECK: Resource[Check] = Resource(
    "AgentCheck",
    {
        "id": Field({"type": "string", "example": "chk_01j…"}, "pk"),
        "object": Const("check"),
        "agent": Field({"type": "string"}, "agent_id"),
        "name": Field({"type": "string"}, "name"),
        "input": Field(
            {"description": "the customer's message, or a list of them (one run each, one conversation)"}, "input"
        ),
        "end_user": Field({"type": ["object", "null"]}, "end_user"),
        "client_outputs": Field({"type": "object", "description": "{client tool name: its output}"}, "client_outputs"),
        "expect": Field(
            {
                "type": "object",
                "description": "tools_called, tools_not_called, output_contains, output_not_contains, status "
                "(default completed)",
            },
            "expect",
        ),
        "created_at": Timestamp("created_at"),
        "updated_at": Timestamp("updated_at"),
    },
)

CHECK_RUN: Resource[CheckRun] = Resource(
    "AgentCheckRun",
    {
        "id": Field({"type": "string", "example": "chkr_01j…"}, "pk"),
        "object": Const("check_run"),
        "agent": Field({"type": "string"}, "agent_id"),
        "version": Field({"type": ["integer", "null"], "description": "null: the draft"}, "version"),
        "status": Field({"enum": ["running", "passed", "failed"]}, "status"),
        "results": Field(
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "check": {"type": "string"},
                        "name": {"type": "string"},
                        "passed": {"type": "boolean"},
                        "problems": {"type": "array", "items": {"type": "string"}},
                        "run": {"type": ["string", "null"], "description": "the check's last run (its steps)"},
                    },
                },
            },
            "results",
        ),
        "created_at": Timestamp("created_at"),
        "finished_at": Field({"type": ["integer", "null"]}, lambda r: unix(r.finished_at)),
    },
)
