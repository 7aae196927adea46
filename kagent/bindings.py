"""A value a lower app is told by a higher one when that app is ready: the one-way way up the layering (the desk's
facts for the engine, the agents' grants of a tool for the tools app). Bound once: another value is an error, the
same again is nothing; asked before it is bound, a LookupError naming what is missing (and `manage.py check` says so
at start: tools/apps.py)."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Binding(Generic[T]):
    def __init__(self, what: str) -> None:
        self.what = what
        self._value: T | None = None

    @property
    def bound(self) -> bool:
        return self._value is not None

    def bind(self, value: T) -> None:
        if self._value is not None and self._value is not value:
            raise ValueError(f"{self.what} are already bound")
        self._value = value

    def get(self) -> T:
        if self._value is None:
            raise LookupError(f"{self.what} are not bound (the app that owns them binds them when it is ready)")
        return self._value
