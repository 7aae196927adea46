from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def current_project(request: HttpRequest) -> dict[str, Any]:
    return {
        "current_project": getattr(request, "project", None),
        "current_membership": getattr(request, "membership", None),
    }
