"""What the provider tests share: requests to `complete`, the tools they offer, and the backoff waits asked for."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llm import retry
from llm.types import Message, ModelRequest, ModelResponse, ToolDefinition
from tests.runs.conftest import h  # noqa: F401  (the demo model through the engine: test_demo.py)
from tools.builtin_defs import CREATE_TICKET, TRANSFER_TO_HUMAN

TENANT_KEY = "sk-tenant-0123456789abcdef"
ORDER_STATUS = ToolDefinition(
    name="order_status",
    description="Look up the shipping status of an order by its order number.",
    parameters={
        "type": "object",
        "properties": {"order_number": {"type": "string", "pattern": "^[0-9]{4,10}$", "description": "The number"}},
        "required": ["order_number"],
        "additionalProperties": False,
    },
)
TRANSFER = ToolDefinition(TRANSFER_TO_HUMAN.name, TRANSFER_TO_HUMAN.description, TRANSFER_TO_HUMAN.parameters)
TICKET = ToolDefinition(CREATE_TICKET.name, CREATE_TICKET.description, CREATE_TICKET.parameters)


def make_request(
    model: dict[str, Any],
    messages: list[Message],
    *,
    tools: tuple[ToolDefinition, ...] = (ORDER_STATUS, TRANSFER),
    tool_choice: str = "auto",
    system: str = "You answer questions about orders.",
    project_id: str = "proj_test",
) -> ModelRequest:
    return ModelRequest(
        system=system,
        messages=tuple(messages),
        tools=tools,
        tool_choice=tool_choice,  # type: ignore[arg-type]
        model=model,
        project_id=project_id,
        run_id="run_test",
    )


def user(content: str) -> Message:
    return Message(role="user", content=content)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff waits `complete` asked for, instead of sleeping them."""
    waits: list[float] = []
    monkeypatch.setattr(retry, "SLEEP", waits.append)
    return waits


def only_call(response: ModelResponse) -> tuple[str, dict[str, Any]]:
    assert len(response.tool_calls) == 1
    return response.tool_calls[0].name, json.loads(response.tool_calls[0].arguments)
