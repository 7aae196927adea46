"""Examples shared by the tests: the seed's own HTTP tool ("HTTP tools"), copied so a test can change it."""

from __future__ import annotations

import copy
from typing import Any

SEED_ORDER_STATUS: dict[str, Any] = {
    "name": "order_status",
    "description": "Look up the status of the customer's order by its number.",
    "effect": "read",
    "requires_verified_user": True,
    "config": {
        "method": "GET",
        "url": "https://api.example.com/customers/{{end_user.external_id}}/orders/{{args.order_number}}",
        "headers": {"Authorization": "Bearer {{secret.ORDERS_TOKEN}}"},
        "parameters": {
            "type": "object",
            "properties": {"order_number": {"type": "string", "description": "The order number, e.g. 8812"}},
            "required": ["order_number"],
            "additionalProperties": False,
        },
        "response": {
            "items_path": "data",
            "fields": [{"path": "status", "label": "Status"}, {"path": "eta", "label": "Expected delivery"}],
            "max_items": 1,
            "empty_message": "No order with that number.",
        },
        "timeout_ms": 8000,
    },
}


def seed_order_status(**overrides: Any) -> dict[str, Any]:
    """A fresh deep copy of the seed's example, with top-level fields replaced."""
    tool = copy.deepcopy(SEED_ORDER_STATUS)
    tool.update(overrides)
    return tool
