"""Prefixed, time-sortable identifiers (`run_01j…`).

26 characters of Crockford base32: 48 bits of milliseconds then 80 random bits, so ordering by id is ordering by
creation time (newest first is `order_by("-id")`) and ids are unguessable.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from django.db import models

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def new_id(prefix: str) -> str:
    value = ((time.time_ns() // 1_000_000) << 80) | secrets.randbits(80)
    chars = []
    for _ in range(26):
        value, rem = divmod(value, 32)
        chars.append(_ALPHABET[rem])
    return f"{prefix}_{''.join(reversed(chars))}"


class PrefixedIdField(models.CharField):  # type: ignore[type-arg]
    """Primary key `<prefix>_<26 chars>`, generated when the object is built."""

    def __init__(self, *args: Any, prefix: str = "", **kwargs: Any) -> None:
        self.prefix = prefix
        kwargs.setdefault("max_length", 40)
        kwargs.setdefault("primary_key", True)
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs["prefix"] = self.prefix
        for key, default in (("max_length", 40), ("primary_key", True), ("editable", False)):
            if kwargs.get(key) == default:
                kwargs.pop(key)
        return name, path, args, kwargs

    def db_type(self, connection: Any) -> str | None:
        # Spelled `character varying`, the same type as `varchar`: PostgreSQL's schema editor adds a second,
        # `varchar_pattern_ops` index (for LIKE 'prefix%') to every indexed column whose type starts with
        # "varchar" — on every id and every foreign key to one. Ids are only compared for equality and order, so
        # those indexes cost every insert and update and serve no query.
        db_type = super().db_type(connection)
        if db_type and db_type.startswith("varchar"):
            return "character varying" + db_type[len("varchar") :]
        return db_type

    def has_default(self) -> bool:
        return True

    def get_default(self) -> str:
        return new_id(self.prefix)
