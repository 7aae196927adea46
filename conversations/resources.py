"""How a conversation's objects look in the API: the session and its messages."""

from __future__ import annotations

from conversations.models import Message, Session
from kagent.rendering import Const, Field, Resource, Timestamp

_ID = {"type": "string"}
_NULLABLE_ID = {"type": ["string", "null"]}


SESSION: Resource[Session] = Resource(
    "Session",
    {
        "id": Field({"type": "string", "example": "ses_01j…"}, "pk"),
        "object": Const("session"),
        "agent": Field(_ID, "agent_id"),
        "end_user": Field(
            {
                "type": ["object", "null"],
                "description": "null: an anonymous end user",
                "properties": {"external_id": {"type": "string"}, "verified": {"const": True}},
            },
            lambda session: (
                {"external_id": session.end_user.external_id, "verified": True} if session.end_user else None
            ),
        ),
        "metadata": Field({"type": "object"}, "metadata"),
        "status": Field(
            {
                "enum": ["open", "handed_off", "closed"],
                "description": "open: the agent answers; handed_off: the team holds the conversation (a handoff, or "
                "a person of the team wrote into it) and the agent keeps quiet; closed: the team closed it (a new run "
                "opens it again). PATCH hands it back (open) or closes it.",
            },
            "status",
        ),
        "flagged": Field({"type": "boolean"}, "flagged"),
        "handed_off_at": Timestamp(
            "handed_off_at", nullable=True, description="when it last went to the team (null: never)"
        ),
        "waiting_since": Timestamp(
            "waiting_since",
            nullable=True,
            description="the customer's oldest message the team has not answered yet (while handed off)",
        ),
        "created_at": Timestamp("created_at"),
    },
)

MESSAGE: Resource[Message] = Resource(
    "Message",
    {
        "id": Field(_ID, "pk"),
        "object": Const("message"),
        "role": Field(
            {
                "enum": ["user", "assistant", "team"],
                "description": "user: the customer; assistant: the agent; team: a person of the business (`author`)",
            },
            "role",
        ),
        "content": Field({"type": "string"}, "content"),
        "author": Field(
            {"type": ["string", "null"], "description": "a team message's writer, as the customer sees it"},
            lambda message: message.author or None,
        ),
        "unverified_claims": Field(
            {
                "type": "array",
                "items": {"type": "string"},
                "description": (
                    "an assistant message's claims that no tool result confirmed (as its run's "
                    "`output.unverified_claims`): don't show its content to the customer as it is"
                ),
            },
            "unverified_claims",
        ),
        "run": Field(
            {**_NULLABLE_ID, "description": "the run that wrote it (null: written by the API or the desk)"}, "run_id"
        ),
        "created_at": Timestamp("created_at"),
    },
)
