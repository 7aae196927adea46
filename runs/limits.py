"""The per-user limits of the policy check (step 7: all HTTP tools together 20 calls an hour, `create_ticket` 5 a
day, and one open agent ticket per customer) held against races.

The counts are the rows themselves (tool calls and tickets of the bucket, in the last hour or day), so what a run
counts and what it writes must happen with nobody else of the same bucket in between: the check and the write that
counts run in one transaction that holds the bucket's lock — a PostgreSQL advisory lock on the bucket's key. N runs
of one end user racing at the limit let exactly the remaining allowance through. A run that is its own bucket (a
one-shot run of the business's server) has nobody to race and takes no lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from django.db import connection, transaction

OWN_BUCKET_PREFIXES = ("run:", "test:run:")
# A publishable key's anonymous one-shot runs: the key and an address, which others (a NAT, an office) may share.
SHARED_BUCKET_PREFIXES = ("anon:", "test:anon:")


@contextmanager
def _bucket_held(project_id: str, rate_key: str) -> Iterator[None]:
    with transaction.atomic():
        with connection.cursor() as cursor:
            # Held until the transaction ends; two buckets sharing a hash only wait for each other.
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"{project_id}:{rate_key}"])
        yield


def bucket_held(project_id: str, rate_key: str) -> AbstractContextManager[None]:
    """Inside: the bucket's counts can't change under the caller (a transaction holding the bucket's lock)."""
    if rate_key.startswith(OWN_BUCKET_PREFIXES):
        return nullcontext()
    return _bucket_held(project_id, rate_key)
