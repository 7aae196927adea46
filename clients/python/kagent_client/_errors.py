"""The one exception type of the client: every error answer of the API (`{"error": {"code", "message", "details"}}`)
and every request that could not be completed."""

from __future__ import annotations

from typing import Any

import httpx


class ApiError(Exception):
    """An error answer of the API: `status` (HTTP status), `code` (stable, documented), `message`, `details`."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        *,
        headers: httpx.Headers | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers if headers is not None else httpx.Headers()

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        """The error answer as the API wrote it; anything else (a proxy's HTML page) keeps its status."""
        try:
            body = response.json()
        except ValueError:
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and isinstance(error.get("code"), str):
            return cls(
                response.status_code,
                error["code"],
                str(error.get("message") or ""),
                error.get("details"),
                headers=response.headers,
            )
        text = response.text[:200] if response.content else ""
        return cls(response.status_code, f"http_{response.status_code}", text or response.reason_phrase, None)


class ApiConnectionError(ApiError):
    """The request got no answer (connection refused or lost, timeout): `status` 0, `code` `connection_error`.

    For a request with side effects (a POST) that may have reached the server, the client does not send it again:
    look before trying again (a run may have been created)."""

    def __init__(self, message: str, *, may_have_reached_server: bool) -> None:
        super().__init__(0, "connection_error", message)
        self.may_have_reached_server = may_have_reached_server
