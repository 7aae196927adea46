"""A conversation: verified end users, sessions and their segments, the messages said in them, and the session's
events (SPEC §4). Below the run, which works in a session, and the desk, which takes a session to the team; both
build on this app. Its tables keep the names they had in `runs` (moved by state only: migrations/0001)."""

from __future__ import annotations

from django.db import models
from django.db.models import Value
from django.utils import timezone

from agents.models import Agent, AgentVersion
from kagent.ids import PrefixedIdField
from kagent.models import ApiKey, Project


class EndUser(models.Model):
    """A verified end user: identified by the business's `external_id`, from a secret key or an end-user token."""

    id = PrefixedIdField(prefix="eu")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="end_users")
    external_id = models.CharField(max_length=255)
    traits = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "runs_enduser"
        constraints = [models.UniqueConstraint(fields=["project", "external_id"], name="end_user_unique")]


class Session(models.Model):
    """A conversation with one end user (verified, or anonymous and counted per session).

    `status`: `open` (the agent answers); `handed_off` once `transfer_to_human` put it in the team's queue or a
    person of the team wrote into it (the agent keeps quiet: `POST /v1/runs` on it is 409 `session_handed_off`,
    the customer's messages are for the team); `closed` when the team closed it (or its last open handoff). The
    team hands it back with `open` (SPEC §4 "Live handoff"); a new run on a closed session opens it again.
    `handed_off_at`: when it last went to the team (null: never; its messages' webhooks are sent once it has);
    `waiting_since`: the customer's oldest message the team has not answered yet (the desk's inbox order).
    """

    class Status(models.TextChoices):
        OPEN = "open"
        HANDED_OFF = "handed_off"
        CLOSED = "closed"

    id = PrefixedIdField(prefix="ses")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="sessions")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="sessions")
    end_user = models.ForeignKey(EndUser, on_delete=models.SET_NULL, null=True, blank=True, related_name="sessions")
    created_by_key = models.ForeignKey(ApiKey, on_delete=models.SET_NULL, null=True, blank=True)
    metadata = models.JSONField(default=dict)
    is_test = models.BooleanField(default=False)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.OPEN)
    flagged = models.BooleanField(default=False)
    flag_reason = models.CharField(max_length=500, blank=True)
    flag_urgency = models.CharField(max_length=10, blank=True)
    flagged_at = models.DateTimeField(null=True, blank=True)
    handed_off_at = models.DateTimeField(null=True, blank=True)
    waiting_since = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_activity_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "runs_session"
        # The desk's inbox: the project's handed-off conversations, the longest-waiting first.
        indexes = [
            models.Index(
                fields=["project", "waiting_since"],
                name="session_team_inbox",
                condition=models.Q(status="handed_off"),
            )
        ]


class Segment(models.Model):
    """A stretch of a session with one frozen tool set (sorted by name), for prompt caching and predictability.

    A new segment starts with the session's first run, when the agent version changes, or after 30 minutes idle.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="segments")
    number = models.IntegerField()
    version = models.ForeignKey(AgentVersion, on_delete=models.SET_NULL, null=True, blank=True)
    version_number = models.IntegerField(null=True, blank=True)  # null: the draft (sandbox)
    tool_set = models.JSONField(default=list)
    started_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "runs_segment"
        constraints = [models.UniqueConstraint(fields=["session", "number"], name="segment_number_unique")]


class Message(models.Model):
    """What the end user said, what the agent answered and what a person of the team wrote (`team`, with its
    `author`), in order; the session's visible conversation. `run`: the run that wrote it (null: written through
    `POST /v1/sessions/{id}/messages` or the desk)."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TEAM = "team"

    id = PrefixedIdField(prefix="msg")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="messages")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, null=True, blank=True, related_name="messages")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, null=True, blank=True, related_name="messages")
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField()
    # A team message's writer as the customer sees it. The database's default too: the engine's statements insert
    # messages without naming it.
    author = models.CharField(max_length=100, blank=True, default="", db_default="")
    # An answer's claims no tool result confirmed (its run's `output.unverified_claims`): what a customer is shown of
    # the conversation later (a reload of the chat widget) must not be that answer's text.
    # The database keeps the default too: code from before this column (a worker still running during a deploy) can
    # write messages without naming it.
    unverified_claims = models.JSONField(
        default=list, db_default=Value([], output_field=models.JSONField()), blank=True
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "runs_message"


class SessionEvent(models.Model):
    """What happened in a conversation, in order, for its event stream (`GET /v1/sessions/{id}/events`): a message
    written (`session.message.created`, `ref` its id: rendered from the message when read, as messages don't
    change; one deleted since, a purged `store: false` run's, is left out) or the session changed
    (`session.updated`, `data`: the session as it was then). Written with what it reports, like a run's events
    (conversations/session_events.py)."""

    class Type(models.TextChoices):
        MESSAGE_CREATED = "session.message.created"
        UPDATED = "session.updated"

    id = models.BigAutoField(primary_key=True)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events", db_index=False)
    type = models.CharField(max_length=30, choices=Type.choices)
    ref = models.CharField(max_length=40, blank=True, default="", db_default="")
    data = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "runs_sessionevent"
        indexes = [models.Index(fields=["session", "id"], name="session_event_order")]
