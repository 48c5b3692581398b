"""A user's profile, calendar and memory, which the agent's tools read and write."""

from django.conf import settings
from django.db import models

from agent_runs.models.runs import Run


class UserProfile(models.Model):
    """Per-user settings; ``settings["timezone"]`` is the user's IANA zone (spec: time-source
    priority, step 3)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_profile"
    )
    settings = models.JSONField(default=dict, blank=True)
    # The user's own webhook (docs/push.md, "The user's webhook"): told when one of the
    # user's runs stops on an interrupt, through the push outbox. "" when not set.
    webhook_url = models.URLField(max_length=2048, blank=True)
    # Signs every delivery to ``webhook_url`` (HMAC-SHA256, as a push config's secret).
    webhook_secret = models.CharField(max_length=128, blank=True)

    def __str__(self) -> str:
        return f"profile of {self.user}"


class CalendarEvent(models.Model):
    """An event of the built-in calendar tools. ``starts_at`` is the UTC instant;
    ``event_timezone`` the zone it was meant in."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="calendar_events"
    )
    run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True)
    title = models.CharField(max_length=200)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)
    event_timezone = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "starts_at"], name="calendar_owner_start")]

    def __str__(self) -> str:
        return f"{self.title} @ {self.starts_at:%Y-%m-%d %H:%M} UTC"


class UserMemory(models.Model):
    """One thing the memory stage keeps about a user (a fact or a preference), read by the
    router and the worker on the user's later runs, in any thread."""

    class Kind(models.TextChoices):
        FACT = "fact"
        PREFERENCE = "preference"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_memories"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FACT)
    content = models.CharField(max_length=500)
    source_run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "content"], name="memory_unique_per_owner")
        ]
        indexes = [models.Index(fields=["owner", "-created_at"], name="memory_owner_recent")]
        verbose_name_plural = "user memories"

    def __str__(self) -> str:
        return f"{self.kind}: {self.content[:60]}"
