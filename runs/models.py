"""Runs, run steps, tool calls and run events. The conversation they belong to (end users, sessions and their
segments, messages, session events) lives in `conversations`; the desk's tickets and handoffs in `desk`."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from agents.models import Agent, AgentVersion
from conversations.models import EndUser, Segment, Session
from kagent.ids import PrefixedIdField
from kagent.models import ApiKey, Project


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        IN_PROGRESS = "in_progress"
        REQUIRES_ACTION = "requires_action"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE = (Status.QUEUED, Status.IN_PROGRESS, Status.REQUIRES_ACTION)
    TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)

    id = PrefixedIdField(prefix="run")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs", db_index=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    # Indexes cost every insert and update of a run: only what a query uses (see Meta and bench/README.md).
    version = models.ForeignKey(AgentVersion, on_delete=models.SET_NULL, null=True, blank=True, db_index=False)
    version_number = models.IntegerField(null=True, blank=True)
    # A run of an agent's check (checks/services.py): {"check_run", "client_outputs"}. Its client tools are answered
    # from `client_outputs` and a call that would wait for approval counts as approved; null for every other run.
    check_options = models.JSONField(null=True, blank=True)
    session = models.ForeignKey(
        Session, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs", db_index=False
    )
    segment = models.ForeignKey(
        Segment, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs", db_index=False
    )
    end_user = models.ForeignKey(EndUser, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs")
    created_by_key = models.ForeignKey(ApiKey, on_delete=models.SET_NULL, null=True, blank=True, db_index=False)
    # `Idempotency-Key` of the request that created it (unique per API key), and a digest of that request's body: the
    # same key again answers with this run; with another body it is refused.
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    idempotency_digest = models.CharField(max_length=64, blank=True, default="")
    # Who limits count against: "eu:<id>" for a verified user, "ses:<id>" for an anonymous session.
    rate_key = models.CharField(max_length=100)

    input = models.TextField(blank=True)
    store = models.BooleanField(default=True)
    allow_actions = models.BooleanField(default=False)
    sandbox = models.BooleanField(default=False)
    run_real_actions = models.BooleanField(default=False)
    metadata = models.JSONField(default=dict)

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    output = models.JSONField(null=True, blank=True)
    last_error = models.JSONField(null=True, blank=True)
    cancellation_reason = models.CharField(max_length=20, blank=True)
    cancel_requested = models.BooleanField(default=False)
    required_action = models.JSONField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    rounds = models.IntegerField(default=0)
    usage = models.JSONField(default=dict)

    # What the engine needs to resume in any worker: the config it runs with, its tool set, the transcript.
    config = models.JSONField(default=dict)
    tool_set = models.JSONField(default=list)
    transcript = models.JSONField(default=list)
    pushbacks = models.IntegerField(default=0)

    created_at = models.DateTimeField(default=timezone.now)
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    claims = models.IntegerField(default=0)
    # Resumed after a pause (the app's outputs, a person's decisions): each resume is a new claim that no crash made.
    resumes = models.IntegerField(default=0)
    # Until when someone follows the run's events (an event stream, a wait): the engine wakes them (Redis PUBLISH)
    # only then; a run nobody follows costs no wake-up. Set by the follower before it looks (runs/run_events.py).
    followed_until = models.DateTimeField(null=True, blank=True)
    purged_at = models.DateTimeField(null=True, blank=True)
    result_delivered = models.BooleanField(default=False)

    class Meta:
        constraints = [
            # Partial: only runs made with an Idempotency-Key have an entry.
            models.UniqueConstraint(
                fields=["created_by_key", "idempotency_key"],
                name="run_idempotency_key_unique",
                condition=~Q(idempotency_key=""),
            )
        ]
        indexes = [
            models.Index(fields=["project", "-created_at"]),  # lists; also the project's cascade
            models.Index(fields=["session", "status"]),  # a session's open runs (superseding)
            # The sweeper's questions, each about few rows: partial indexes hold only those rows.
            # In progress: the lease itself is left out of the index, so the round write (which extends it) can be a
            # HOT update (with the table's fillfactor, runs/migrations/0004): the sweeper filters the few rows here.
            models.Index(fields=["status"], name="run_in_progress", condition=Q(status="in_progress")),
            models.Index(fields=["queued_at"], name="run_queued_since", condition=Q(status="queued")),
            models.Index(fields=["expires_at"], name="run_awaiting_until", condition=Q(status="requires_action")),
            models.Index(
                fields=["completed_at"], name="run_unpurged_unstored", condition=Q(store=False, purged_at__isnull=True)
            ),
        ]


class RunStep(models.Model):
    """Everything that happened in a run, including what the model was not shown (upstream status, bodies)."""

    class Kind(models.TextChoices):
        MODEL_CALL = "model_call"
        TOOL_CALL = "tool_call"
        NOTICE = "notice"
        # A tool call the model wrote as text that only repeats one in an input of the run: never run.
        QUOTED_TOOL_CALL = "quoted_tool_call"

    id = PrefixedIdField(prefix="step")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    round = models.IntegerField(default=0)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.IntegerField(default=0)


class ToolCall(models.Model):
    """One tool call, with a stable id (sent as `webhook-id`) so a retry after a crash is recognisable upstream."""

    class Status(models.TextChoices):
        PENDING = "pending"  # recorded, not yet checked or run
        REFUSED = "refused"  # the policy check said no; nothing ran
        RUNNING = "running"  # may have reached the upstream: on recovery it is retried with the same id
        AWAITING_OUTPUT = "awaiting_output"  # a client tool call, waiting for submit_tool_outputs
        AWAITING_APPROVAL = "awaiting_approval"  # allowed, waiting for a person's approve_tool_calls; nothing sent
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = PrefixedIdField(prefix="call")
    # Both covered by the indexes in Meta (the limits' lookup; a run's calls by position).
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tool_calls", db_index=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_calls", db_index=False)
    round = models.IntegerField()
    index = models.IntegerField()
    model_call_id = models.CharField(max_length=200)
    requested_name = models.CharField(max_length=200)
    name = models.CharField(max_length=64)
    kind = models.CharField(max_length=10, blank=True)  # builtin | http | mcp | client | "" (unknown tool)
    effect = models.CharField(max_length=12, blank=True)
    arguments = models.JSONField(null=True, blank=True)
    arguments_hash = models.CharField(max_length=64, blank=True)
    rate_key = models.CharField(max_length=100)
    policy_decision = models.CharField(max_length=10, blank=True)  # allowed | refused
    policy_code = models.CharField(max_length=40, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    result = models.JSONField(null=True, blank=True)  # exactly what the model was shown
    upstream = models.JSONField(null=True, blank=True)  # status, body excerpt (secrets masked), timings
    simulated = models.BooleanField(default=False)
    # A person's decision on a call that waited for approval: {decision: approve | deny | expired, scope: once |
    # session, note, decided_by: {type: api_key | member, id, name}, decided_at}. Null: it needed none.
    approval = models.JSONField(null=True, blank=True)
    attempts = models.IntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "round", "index"], name="tool_call_position_unique")]
        indexes = [models.Index(fields=["project", "rate_key", "kind", "created_at"])]


class RunEvent(models.Model):
    """What happened to a run, in order, for its event stream (`GET /v1/runs/{id}/events`): written with what it
    reports (the same statement or transaction), so a stream resumed with Last-Event-ID misses nothing and repeats
    nothing. `id` orders the events of every run; `ref` is the step or tool call of a `run.step.created`, `text`
    the answer's piece of a `run.output.delta` (the answer as the model writes it, once the truthfulness guard has
    passed it: runs/live_answer.py)."""

    class Type(models.TextChoices):
        QUEUED = "run.queued"
        IN_PROGRESS = "run.in_progress"
        STEP_CREATED = "run.step.created"
        REQUIRES_ACTION = "run.requires_action"
        COMPLETED = "run.completed"
        FAILED = "run.failed"
        CANCELLED = "run.cancelled"
        OUTPUT_DELTA = "run.output.delta"
        OUTPUT_RESET = "run.output.reset"

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
    type = models.CharField(max_length=30, choices=Type.choices)
    ref = models.CharField(max_length=40, blank=True)
    # A run.output.delta's piece of the answer. The default is the database's too: the engine's statements insert
    # the other events without naming it.
    text = models.TextField(blank=True, default="", db_default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["run", "id"], name="run_event_order")]
