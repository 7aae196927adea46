"""URL converters for `/v1` and dashboard paths: an id that can't be one of ours never reaches a query (it is a plain
404). Registered here, once, for every URLconf that names them (`oid`, `name`)."""

from __future__ import annotations

from django.urls import register_converter

# linear: bounded length, literal separator (a URL converter and the list cursor match request text with it)
ID_PATTERN = r"[a-z]{2,5}_[0-9a-z]{26}"


class ObjectIdConverter:
    regex = ID_PATTERN

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class NameConverter:
    """A tool or secret name as typed: its own rules are checked (with a 422) by the service; control characters
    and NUL never get that far."""

    # linear: one class, at most 200 characters
    regex = r"[^/\x00-\x1f\x7f]{1,200}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ObjectIdConverter, "oid")
register_converter(NameConverter, "name")
