"""The run workers that are alive."""

from django.db import models
from django.db.models.functions import Now


class WorkerBeat(models.Model):
    """A run worker that is alive: it upserts its row every ``WORKER_BEAT_SECONDS`` and
    deletes it when it stops cleanly. Kept in PostgreSQL, not in RQ's worker registry, since
    Redis may be flushed at any time; ``/readyz`` counts the rows beaten recently."""

    name = models.CharField(max_length=200, unique=True)  # RQ's worker name
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.CharField(max_length=200)  # comma-separated
    started_at = models.DateTimeField()
    # The database's clock, as every comparison with it (workers' clocks may differ).
    beat_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["beat_at"], name="worker_beat_recent")]

    def __str__(self) -> str:
        return f"{self.name} ({self.hostname}:{self.pid})"
