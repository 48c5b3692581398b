"""Steps and artifacts of a thread."""

import uuid

from django.db import models
from django.utils import timezone

from agent_runs.models.runs import Run
from agent_runs.models.threads import Thread


class Step(models.Model):
    """One step of a thread's work: a stage of one of its runs (written by the run's job as
    the stage runs; its id is ``agent_step_id``), or a step a client records itself."""

    class Status(models.TextChoices):
        CREATED = "created"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    class Source(models.TextChoices):
        AGENT = "agent"
        CLIENT = "client"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="steps")
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="steps", null=True, blank=True
    )
    source = models.CharField(max_length=8, choices=Source.choices)
    name = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CREATED)
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    additional_input = models.JSONField(default=dict, blank=True)
    additional_output = models.JSONField(default=dict, blank=True)
    is_last = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["thread", "created_at"], name="step_thread_created")]
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.name or self.pk} ({self.status})"


def agent_step_id(*, thread_id: uuid.UUID | str, run_id: str, stage: str) -> uuid.UUID:
    """The id of a run's stage as a step: derived from what every event of the stage carries
    (``threadId``, ``runId``, ``stepName``), so a translator of the journal names the same
    step the REST API does without reading it."""
    return uuid.uuid5(uuid.UUID(str(thread_id)), f"{run_id}/{stage}")


class Artifact(models.Model):
    """A file of a thread's work: one object in the attachments storage, uploaded by the
    thread's owner or made by the agent (its final answer), optionally of one step."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="artifacts")
    step = models.ForeignKey(
        Step, on_delete=models.CASCADE, related_name="artifacts", null=True, blank=True
    )
    agent_created = models.BooleanField(default=False)
    file_name = models.CharField(max_length=255)
    relative_path = models.CharField(max_length=1024, blank=True)
    # The object's name in the attachments storage.
    storage_name = models.CharField(max_length=1024, unique=True, editable=False)
    mime_type = models.CharField(max_length=255)
    size_bytes = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["thread", "created_at"], name="artifact_thread_created")]
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.relative_path or self.file_name
