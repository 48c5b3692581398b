"""The journal: every event of a run, as sent on the wire."""

from django.db import models
from django.utils import timezone

from agent_runs.models.runs import Run
from agent_runs.models.threads import Thread


class RunEvent(models.Model):
    """One AG-UI event of a run, as sent on the wire (docs/spec/sse-events-and-usage.md).

    The primary key is the SSE event id: it only grows, and a thread's runs execute one at a
    time, so a thread's events are in id order and its journal is a concatenation of whole
    runs. ``seq`` is the event's ordinal within its run (0 for its RUN_STARTED), so a
    protocol's translator numbers a replay exactly as the live stream did.
    """

    # Indexed with the id below: reads are "this thread's (or run's) events in id order".
    # No foreign key constraints in the database: PostgreSQL checked both for every row (a
    # lookup and a row lock each, nearly half of a batch's insert). Every statement that
    # writes events fences the whole batch instead, once (``events/store.py``): on the run,
    # claimed and running, or, for a write of no claim, on the thread's row, locked as the
    # constraint locked it, so a thread deleted meanwhile gets no rows. Deleting a thread
    # still deletes its events (the ORM's cascade).
    thread = models.ForeignKey(
        Thread,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
        db_constraint=False,
    )
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="events", db_index=False, db_constraint=False
    )
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=32)
    payload = models.JSONField()
    # When it was written: one time for a batch written together, which a live stream reads
    # from Redis and a replay from here (the Agent Protocol's frame ``timestamp``).
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="event_unique_seq_per_run")
        ]
        indexes = [models.Index(fields=["thread", "id"], name="event_thread_id")]

    def __str__(self) -> str:
        return f"{self.pk} {self.type}"
