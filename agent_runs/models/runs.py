"""Runs: one turn of a thread, from queued to its end."""

import uuid

from django.db import models

from agent_runs.models.threads import MultitaskStrategy, Thread


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        # Parked at a stage boundary (a pause, or the end of its step budget): its progress
        # is in ``checkpoint``, no job holds it, and it keeps its thread's turn.
        PAUSED = "paused"

    class RuntimeMode(models.TextChoices):
        CHAT = "chat"
        AUTOMATION = "automation"

    class Protocol(models.TextChoices):
        """The protocol whose request made the run (each protocol edge says so to
        ``run_create``); AG-UI's for a run no protocol made (an automation's)."""

        AGUI = "agui", "AG-UI"
        AGENT_PROTOCOL = "agent_protocol", "Agent Protocol"
        AGENT_API = "agent_api", "Agent API"
        OPENAI_RESPONSES = "openai_responses", "OpenAI Responses API"
        A2A = "a2a", "A2A"

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="runs")
    run_id = models.CharField(max_length=128)
    parent_run_id = models.CharField(max_length=128, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    runtime_mode = models.CharField(max_length=16, choices=RuntimeMode.choices)
    protocol = models.CharField(max_length=32, choices=Protocol.choices, default=Protocol.AGUI)
    # The validated RunAgentInput, camelCase, as the client's snapshot of this run.
    input = models.JSONField()
    input_sha256 = models.CharField(max_length=64, editable=False)
    client_time = models.JSONField(null=True, blank=True)
    # The AutomationJob an automation run names (RunAgentInput.context), "" for chat runs.
    automation_job = models.CharField(max_length=100, blank=True)
    # The RQ job id, answered as TaskAcceptedResponse.taskId.
    task_id = models.UUIDField(unique=True, default=uuid.uuid4, editable=False)
    # Whether this run created its thread, so an idempotent retry answers the same.
    created_thread = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    # A client asked to pause it: its job parks it at the next stage boundary.
    pause_requested = models.BooleanField(default=False)
    # Where a parked run goes on: the next stage and what the stages before it gave.
    checkpoint = models.JSONField(null=True, blank=True)
    # What the protocol request that made the run asked beyond its input (a Responses
    # request's model, instructions, metadata, background…), kept to answer it back, and
    # the knobs one protocol sets that the core acts on (services/run_request.py: a step
    # budget, keeping the answer as a file artifact).
    request = models.JSONField(default=dict, blank=True)
    # Set by the job that claimed the run; every write of that job for the run checks it in
    # the same statement, so a job that lost its run (failed by the sweeper) writes nothing.
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    # Renewed by the claiming worker while the job runs: PostgreSQL, not Redis, tells the
    # sweeper whether a running run's worker is alive.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When a client last resumed the paused run: from then on it is under way again (the
    # Agent Protocol reports its task ``running``), though it waits in the queue.
    resumed_at = models.DateTimeField(null=True, blank=True)
    # The worker's reply, held when the run ended on tool calls waiting for an answer
    # (``Interrupt`` rows): AgentScope's agent state and the router's decision, from which
    # the run that answers them goes on (kept after, for staff).
    suspended_reply = models.JSONField(null=True, blank=True)
    # The run whose held reply this run goes on with (it answers that run's interrupts).
    continues = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="continued_by"
    )
    # The strategy the run was created by (what it did, or would have done, on a busy
    # thread): MultitaskStrategy; "" for a run that answers an interrupt.
    multitask = models.CharField(max_length=16, choices=MultitaskStrategy.choices, blank=True)
    # Created by ``interrupt`` or ``rollback``: it goes before the thread's runs that are
    # queued and were not (its thread's line is these first, then by id).
    jumps_queue = models.BooleanField(default=False)
    # Cancelled by a ``rollback``: its messages are hidden from the conversation (/history,
    # the model's context), kept for staff; its usage stays billed.
    rolled_back = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "run_id"], name="run_unique_run_id_per_thread"
            )
        ]
        indexes = [
            models.Index(fields=["thread", "status"], name="run_thread_status"),
            models.Index(fields=["thread", "-created_at"], name="run_thread_recent"),
            # A protocol's response id is the run's runId, looked up without its thread.
            models.Index(fields=["run_id"], name="run_run_id"),
            models.Index(fields=["status", "created_at"], name="run_status_created"),
            # A protocol's runs of one owner (its threads'): A2A's tasks of a user.
            models.Index(fields=["thread", "protocol"], name="run_thread_protocol"),
        ]

    def __str__(self) -> str:
        return self.run_id


# A run still to end (it holds its thread's turn), and a run that has ended.
RUN_ACTIVE_STATUSES = (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.PAUSED)
RUN_ENDED_STATUSES = (Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED)
