"""An API source's response as the text its passages are split from, shaped like an HTTP tool's response.

The rows are what `response.items_path` leads to; of each row only the `response.fields` listed (up to 12, with
their labels) are kept, cleaned like shaped values (control, bidi and zero-width characters removed, Arabic joiners
kept). Each row becomes `Label: value` lines; with two fields or more they are a section of Markdown headed by the
first value (a FAQ's question, a product's name), so each row is its own passage (or more, when it is long) with
that heading in its title.
"""

from __future__ import annotations

import json
from typing import Any, Final

from tools.shaping import clean_text, labelled_values, response_fields, response_items

MAX_ROWS: Final = 1000
DEFAULT_ROWS: Final = 500
MAX_VALUE_CHARS: Final = 5000
MAX_CONTENT_CHARS: Final = 200_000


def _value_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        text = value
    elif isinstance(value, int | float):
        text = str(value)
    elif isinstance(value, list) and all(isinstance(item, str | int | float) for item in value):
        text = ", ".join(str(item) for item in value)
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    return " ".join(clean_text(text[: MAX_VALUE_CHARS * 2], keep_joiners=True).split())[:MAX_VALUE_CHARS]


def rows_text(*, body: bytes, response_config: dict[str, Any]) -> tuple[str, int]:
    """The Markdown text of the response's rows and how many rows it holds. Raises tools.shaping.ShapingError."""
    items = response_items(body=body, items_path=str(response_config.get("items_path") or ""))
    fields = response_fields(response_config)
    max_items = response_config.get("max_items", DEFAULT_ROWS)
    if isinstance(max_items, bool) or not isinstance(max_items, int) or max_items < 1:
        max_items = DEFAULT_ROWS
    sections: list[str] = []
    size = 0
    for item in items[: min(max_items, MAX_ROWS)]:
        values = [
            (" ".join(clean_text(label, keep_joiners=True).split()), _value_text(value))
            for _, label, value in labelled_values(item, fields)
        ]
        values = [(label, text) for label, text in values if text]
        if not values:
            continue
        lines = [f"{label}: {text}" for label, text in values]
        if len(fields) >= 2:
            lines.insert(0, f"## {values[0][1][:200]}")
        section = "\n".join(lines)
        if size + len(section) > MAX_CONTENT_CHARS:
            break
        sections.append(section)
        size += len(section) + 2
    return "\n\n".join(sections), len(items)
