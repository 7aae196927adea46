"""Running the built-in tools: `builtin_execute`, the engine's one way to run an allowed call of a built-in (its
executor, and the call recorded as succeeded, in one transaction), and the executors of the built-ins that act on
the run's own conversation (`flag_conversation`) or read the agent's knowledge for it (`search_knowledge`). The
desk's built-ins (`transfer_to_human`, `create_ticket`) are executed by desk/executors.py.

Each executor is bound to its definition in the registry (tools/builtins.py, which says why it is bound there at
app-ready time rather than written beside the definition) and returns exactly what the model is shown; each is
idempotent per tool call id, so a retry after a crash finds what it already made instead of making it twice.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.knowledge.results import search_result
from agents.knowledge.terms import query_terms
from agents.selectors import knowledge_search
from conversations.models import Session
from runs import webhook_events
from runs.models import Run, ToolCall
from tools.builtin_defs import FLAG_CONVERSATION, SEARCH_KNOWLEDGE
from tools.builtins import executes, executor

SEARCH_RESULTS = 3


@executes(FLAG_CONVERSATION)
def flag_conversation(run: Run, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    flagged = Session.objects.filter(pk=run.session_id).update(
        flagged=True, flag_reason=args["reason"], flag_urgency=args.get("urgency", "normal"), flagged_at=timezone.now()
    )
    if flagged and run.session_id is not None and not run.sandbox:
        webhook_events.flagged_event(project_id=run.project_id, session_id=run.session_id)
    return {"ok": True, "flagged": True, "message": "The conversation is flagged for the team to review."}


@executes(SEARCH_KNOWLEDGE)
def search_knowledge(run: Run, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    query = args["query"]
    hits = knowledge_search(project_id=run.project_id, agent_id=run.agent_id, query=query, limit=SEARCH_RESULTS)
    return search_result(hits, query_terms(query))


def builtin_execute(
    *, run: Run, call: ToolCall, name: str, arguments: dict[str, Any], fields: dict[str, Any]
) -> dict[str, Any]:
    """Runs the built-in and records the call (with `fields`: its policy decision) in the same transaction."""
    with transaction.atomic():
        result = executor(name)(run, call, arguments)
        ToolCall.objects.filter(pk=call.pk).update(
            status=ToolCall.Status.SUCCEEDED, result=result, finished_at=timezone.now(), **fields
        )
    call.status, call.result = ToolCall.Status.SUCCEEDED, result
    return result
