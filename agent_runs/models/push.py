"""The push-notification outbox (agent_runs/push/): where a client is pushed to, and each
delivery."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models.functions import Now

from agent_runs.models.profiles import UserProfile
from agent_runs.models.threads import Thread


class PushConfig(models.Model):
    """Where a client wants a task's updates pushed (a webhook): one per URL a protocol's
    client registered for a task of its thread (docs/push.md). The protocol names the task
    (``task_ref``, e.g. an A2A task id) and, optionally, the config (``config_ref``)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="push_configs"
    )
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="push_configs")
    protocol = models.CharField(max_length=32)
    task_ref = models.CharField(max_length=128)
    # The protocol's id of this config (A2A's PushNotificationConfig.id), "" when it has none.
    config_ref = models.CharField(max_length=128, blank=True)
    url = models.URLField(max_length=2048)
    # The client's own token, sent back on every delivery in the header the protocol names.
    token = models.CharField(max_length=512, blank=True)
    token_header = models.CharField(max_length=64, blank=True)
    # Signs every delivery (HMAC-SHA256); never shown in the admin.
    secret = models.CharField(max_length=128, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "protocol", "task_ref", "config_ref"],
                name="push_config_unique_ref",
            )
        ]
        indexes = [models.Index(fields=["owner", "-created_at"], name="push_config_owner_recent")]

    def __str__(self) -> str:
        return f"{self.protocol} {self.task_ref} → {self.url}"


class PushDelivery(models.Model):
    """One update to push to one config: the outbox row, written in the transaction that
    changed the state it reports. Its id is the idempotency key (``X-Push-Delivery``), the
    same on every attempt."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Where it goes: a protocol's push config, or a user's own webhook (their profile's).
    config = models.ForeignKey(
        PushConfig, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    profile = models.ForeignKey(
        UserProfile,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="webhook_deliveries",
    )
    body = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # When a pending delivery is due: its next attempt, or the end of the lease of the
    # attempt in flight (a worker that died mid-attempt leaves it due again).
    # The database's clock, as every comparison with it (workers' clocks may differ).
    next_attempt_at = models.DateTimeField(db_default=Now())
    last_error = models.TextField(blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "push deliveries"
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="push_delivery_due",
                condition=models.Q(status="pending"),
            ),
            models.Index(fields=["config", "-created_at"], name="push_delivery_config_recent"),
            models.Index(fields=["profile", "-created_at"], name="push_delivery_profile_recent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(config__isnull=False, profile__isnull=True)
                | models.Q(config__isnull=True, profile__isnull=False),
                name="push_delivery_one_target",
            )
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"
