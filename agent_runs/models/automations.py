"""Automation jobs: runs started on a schedule."""

from django.conf import settings
from django.db import models

from agent_runs.models.runs import Run
from agent_runs.models.threads import MultitaskStrategy, Thread


class AutomationJob(models.Model):
    """The runtime configuration of ``automation`` runs that name it (docs/spec/run-agent-input.md,
    runtime_mode): ``config`` holds ``enabled_tools`` and ``context`` (for all stages, or per
    stage under the stage's name). A job of a user's may run on a schedule (docs/automations.md):
    each due time of its cron expression, read in its timezone, makes one run of the owner's
    with its prompt. A job without an owner is shared: any user's automation run may name
    it, and it runs on no schedule."""

    class ThreadPolicy(models.TextChoices):
        NEW = "new", "a new thread per run"
        SAME = "same", "one thread, the previous runs as context"

    class CatchUp(models.TextChoices):
        SKIP = "skip", "missed times make no run"
        ONCE = "once", "missed times together make one run"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="automation_jobs",
        help_text="Whose runs it makes (billed to them). Empty: a shared job, no schedule.",
    )
    name = models.SlugField(max_length=100)
    description = models.TextField(blank=True)
    config = models.JSONField(default=dict, blank=True)
    schedule = models.CharField(
        max_length=120,
        blank=True,
        help_text="5 cron fields (minute hour day month weekday); empty: run by hand only.",
    )
    timezone = models.CharField(
        max_length=64, default="UTC", help_text="IANA timezone the schedule is read in."
    )
    prompt = models.TextField(blank=True, help_text="The user message each run sends.")
    thread_policy = models.CharField(
        max_length=8, choices=ThreadPolicy.choices, default=ThreadPolicy.NEW
    )
    enabled = models.BooleanField(default=True)
    catch_up = models.CharField(max_length=8, choices=CatchUp.choices, default=CatchUp.SKIP)
    # What a due time does while the job's previous run is still going.
    multitask = models.CharField(
        max_length=16, choices=MultitaskStrategy.choices, default=MultitaskStrategy.ENQUEUE
    )
    # The thread of a ``same``-thread job, made by its first run.
    thread = models.ForeignKey(
        Thread, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    # The next due time (UTC), null when it runs on no schedule: the claim. A worker fires a
    # due job under its row lock and moves this on in the same transaction.
    next_run_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    # What the last due time did: the run it made, or why it made none.
    last_outcome = models.CharField(max_length=300, blank=True, editable=False)
    last_outcome_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="automation_job_owner_name"),
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(owner__isnull=True),
                name="automation_job_shared_name",
            ),
            models.CheckConstraint(
                condition=models.Q(owner__isnull=False) | models.Q(schedule=""),
                name="automation_job_schedule_has_owner",
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_run_at"],
                condition=models.Q(enabled=True, next_run_at__isnull=False),
                name="automation_job_due",
            )
        ]

    def __str__(self) -> str:
        return self.name
