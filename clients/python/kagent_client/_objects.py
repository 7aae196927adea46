"""What the API answers, as light objects: attribute access (`run.id`, `run.required_action.tool_calls`) over the
JSON the server sent, which stays available as it came (`run.raw`, `run["status"]`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


def wrap(value: Any) -> Any:
    """JSON objects become KObjects (lists of them, lists of KObjects); everything else stays as it is."""
    if isinstance(value, Mapping):
        return KObject(value)
    if isinstance(value, list):
        return [wrap(item) for item in value]
    return value


class KObject:
    """One object of the API. A field is an attribute (`run.status`) or an item (`run["status"]`, raw JSON);
    `raw` is the dict the server sent. A field the object doesn't have is an AttributeError, not None."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_data", dict(data))

    @property
    def raw(self) -> dict[str, Any]:
        return self._data  # type: ignore[no-any-return]  # __slots__ member set through object.__setattr__

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_data":  # copy and pickle look before __init__ ran
            raise AttributeError(name)
        try:
            return wrap(self._data[name])
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("API objects are read-only; change them with the resource's update()")

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._data))  # type: ignore[no-any-return]  # a deep copy of JSON

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KObject):
            return bool(self._data == other._data)
        if isinstance(other, Mapping):
            return bool(self._data == dict(other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable underneath, like a dict

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *(key for key in self._data if key.isidentifier())})

    def __reduce__(self) -> tuple[Any, ...]:
        return (KObject, (self._data,))

    def __repr__(self) -> str:
        kind = self._data.get("object")
        name = f"KObject<{kind}>" if isinstance(kind, str) else "KObject"
        return f"{name}({json.dumps(self._data, ensure_ascii=False, default=str)[:500]})"


class Page:
    """One page of a list: `data` (newest first) and the `next` cursor (None on the last page). Iterating a page
    iterates its objects; a resource's `iterate()` follows the cursors for you."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = dict(raw)
        self.data: list[KObject] = [KObject(item) for item in raw.get("data") or []]
        cursor = raw.get("next")
        self.next: str | None = cursor if isinstance(cursor, str) and cursor else None

    def __iter__(self) -> Iterator[KObject]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"Page({len(self.data)} objects, next={self.next!r})"


@dataclass(frozen=True)
class Event:
    """One Server-Sent Event of a run: `event` (`run.queued`, `run.step.created`, `run.completed`…), `id` (what
    `Last-Event-ID` resumes after), `data` (the run or the step as the API renders it; a KObject when it is a JSON
    object, else the parsed JSON, or the text when it isn't JSON)."""

    event: str
    id: str | None
    data: Any
    raw_data: str

    @classmethod
    def parse(cls, event: str, id: str | None, raw_data: str) -> Event:
        try:
            data = wrap(json.loads(raw_data))
        except ValueError:
            data = raw_data
        return cls(event=event, id=id, data=data, raw_data=raw_data)


class Answer:
    """A run's answer as it is written, from its events (`runs.stream()`): give it each event (`add`), show
    `text`. It grows with each `run.output.delta` (whole sentences the truthfulness guard passed), starts over on
    `run.output.reset` (what was shown was not the answer), and once the run completed it is the run's
    `output.text` — or, when the run's claims could not be matched to a tool result (`unverified_claims`), empty:
    show a neutral reply then, never the model's words."""

    def __init__(self) -> None:
        self.text = ""
        self.done = False  # the run completed (or ended otherwise)
        self.unverified_claims: list[str] = []

    def add(self, event: Event) -> bool:
        """Takes one event; whether `text` changed."""
        before = self.text
        data = event.data
        if event.event == "run.output.delta" and isinstance(data, KObject):
            self.text += str(data.get("delta") or "")
        elif event.event == "run.output.reset":
            self.text = ""
        elif event.event == "run.completed" and isinstance(data, KObject):
            self.done = True
            output = data.get("output")
            claims = list(output.get("unverified_claims") or []) if isinstance(output, KObject) else []
            self.unverified_claims = [str(claim) for claim in claims]
            if self.unverified_claims:
                self.text = ""
            elif isinstance(output, KObject) and isinstance(output.get("text"), str):
                self.text = output.get("text")
        elif event.event in ("run.failed", "run.cancelled"):
            self.done, self.text = True, ""
        return self.text != before
