"""Webhooks to the business: its endpoints, the events (an outbox written with what they report), one delivery of
an event to an endpoint, and each attempt of a delivery (the delivery log)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models
from django.db.models import Q
from django.utils import timezone

from kagent.ids import PrefixedIdField
from kagent.models import Project


@dataclass(frozen=True)
class EventType:
    """What an event's `data` is: the kind of object, and its schema's component in the OpenAPI document (the
    resource its app renders it with: runs, conversations and the desk sit above this app)."""

    object: str
    schema: str


# The one list of the events a business can subscribe to (SPEC §4 "Webhook event"; issue #11), each with its payload.
# What subscribes, validates, dispatches, renders and documents reads it (hooks/outbox.py: the run events recorded by
# the engine's own statements; runs/webhook_events.py: the run's status of each; hooks/resources.py: each event's
# schema in the OpenAPI document's `webhooks`).
_RUN = EventType("run", "Run")
_HANDOFF = EventType("handoff", "Handoff")
_TICKET = EventType("ticket", "Ticket")
_SESSION = EventType("session", "Session")
_MESSAGE = EventType("message", "Message")
_APPROVAL = EventType("approval", "Approval")
EVENTS: dict[str, EventType] = {
    "run.completed": _RUN,
    "run.failed": _RUN,
    "run.requires_action": _RUN,
    "run.cancelled": _RUN,
    "handoff.created": _HANDOFF,
    "handoff.closed": _HANDOFF,
    "ticket.created": _TICKET,
    "ticket.updated": _TICKET,
    "conversation.flagged": _SESSION,
    "session.message.created": _MESSAGE,
    "session.updated": _SESSION,
    "approval.requested": _APPROVAL,
    "approval.decided": _APPROVAL,
}
EVENT_TYPES: tuple[str, ...] = tuple(EVENTS)
PING = "ping"  # the test event a person sends an endpoint from the dashboard: nobody subscribes to it


class WebhookEndpoint(models.Model):
    """A URL of the business that receives the events it subscribed to, signed with its own `whsec_` secret.

    After a rotation the previous secret keeps signing (a second signature) until `previous_secret_expires_at`.
    `failing_since`: the first failed attempt since the last successful one (null while deliveries succeed).
    """

    id = PrefixedIdField(prefix="we")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhook_endpoints", db_index=False)
    url = models.CharField(max_length=2048)
    description = models.CharField(max_length=500, blank=True)
    event_types = models.JSONField(default=list)
    secret_ciphertext = models.BinaryField()
    previous_secret_ciphertext = models.BinaryField(null=True, blank=True)
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=500, blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    failing_since = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # The outbox's question on every reported change ("does this project have an enabled endpoint for this
        # type?") reads this index only; the project's cascade uses it too.
        indexes = [models.Index(fields=["project", "enabled"], name="webhook_endpoint_project")]

    def binding(self, which: str = "current") -> str:
        return f"webhook:{self.project_id}:{self.pk}:{which}"


class WebhookEvent(models.Model):
    """One event, recorded in the transaction of the change it reports (the outbox). `data` is the object as the API
    renders it: given when recorded (the desk's objects) or rendered when the event is dispatched (a run's, whose
    hot-path statements record only the row; the run is rendered with the status of the event). `dispatched_at`:
    when its deliveries were made."""

    id = PrefixedIdField(prefix="evt")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhook_events", db_index=False)
    type = models.CharField(max_length=40)
    object_id = models.CharField(max_length=40)
    data = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    dispatched_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["project", "-created_at"], name="webhook_event_project"),
            models.Index(fields=["created_at"], name="webhook_event_undispatched", condition=Q(dispatched_at=None)),
        ]


class WebhookDelivery(models.Model):
    """An event on its way to one endpoint: pending (with the time of its next attempt), succeeded or failed.

    A worker takes a pending delivery by setting `leased_until` with a conditional UPDATE (one worker wins); a
    worker that dies mid-attempt leaves a lease that runs out, and the sweep sends the delivery again, with the same
    event id as `webhook-id`. `manual`: the pending attempt is a redelivery asked for by the business (one attempt,
    no automatic retries after it).
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    id = PrefixedIdField(prefix="whd")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhook_deliveries", db_index=False)
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries", db_index=False)
    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.IntegerField(default=0)
    retries = models.IntegerField(default=0)  # automatic attempts after the first, counted against the schedule
    manual = models.BooleanField(default=False)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.IntegerField(null=True, blank=True)
    last_error_code = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["endpoint", "event"], name="webhook_delivery_once")]
        indexes = [
            models.Index(fields=["endpoint", "-created_at"], name="webhook_delivery_endpoint"),
            models.Index(fields=["next_attempt_at"], name="webhook_delivery_due", condition=Q(status="pending")),
        ]


class WebhookAttempt(models.Model):
    """One attempt of a delivery, as the business's server answered it (or didn't)."""

    class Outcome(models.TextChoices):
        SUCCEEDED = "succeeded"
        RETRYING = "retrying"  # failed; another attempt is scheduled
        FAILED = "failed"  # failed; no more attempts

    id = models.BigAutoField(primary_key=True)
    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.IntegerField()
    manual = models.BooleanField(default=False)
    started_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.IntegerField(default=0)
    status_code = models.IntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=40, blank=True)
    response_excerpt = models.CharField(max_length=600, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    note = models.CharField(max_length=500, blank=True)  # what followed, e.g. the endpoint disabled after it
