"""The seed's "Network limits" as numbers: ports, methods, sizes and times every outbound call is held to."""

from __future__ import annotations

MAX_RESPONSE_BYTES = 1024 * 1024
MAX_TIMEOUT_MS = 15_000
CONNECT_TIMEOUT_S = 3.0
MAX_URL_LENGTH = 8192
MAX_REQUEST_BODY_BYTES = 1024 * 1024
ALLOWED_PORTS = {"443": 443, "8443": 8443}
ALLOWED_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
