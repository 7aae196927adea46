"""The chat widget's demo page (`/widget/demo/`): a stand-in for a business's own page, embedding `/widget.js` with a
publishable key and an agent given in the query (`bin/run` prints the link for the demo agent). Public: it holds
nothing but what the link gave it, and a publishable key is meant to be seen."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from kagent.auth import KEY_RE

_ID_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")


def _agent_id(value: str) -> bool:
    """`agt_` and 26 base32 characters (kagent.ids), checked without an expression."""
    return len(value) == 30 and value.startswith("agt_") and set(value[4:]) <= _ID_CHARS


@require_GET
def widget_demo(request: HttpRequest) -> HttpResponse:
    key = (request.GET.get("key") or "").strip()
    agent = (request.GET.get("agent") or "").strip()
    problems: list[str] = []
    if key.startswith("ka_sk_"):
        problems.append("Publishable key: that is a secret key. Never put it in a web page: revoke it (dashboard).")
        key = ""  # not shown back
    elif key or agent:
        if not (KEY_RE.match(key) and key.startswith("ka_pk_")):
            problems.append("Publishable key: a publishable key starts with ka_pk_ (never put a secret key in a page).")
        if not _agent_id(agent):
            problems.append("Agent: an agent id looks like agt_ followed by 26 letters and digits.")
    ready = bool(key and agent and not problems)
    origin = request.build_absolute_uri("/").rstrip("/")
    context = {"key": key, "agent": agent, "problems": problems, "ready": ready, "origin": origin}
    return render(request, "widget/demo.html", context)
