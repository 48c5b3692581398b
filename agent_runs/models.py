import enum
import hashlib
import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models.functions import Now
from django.utils import timezone


class ApiToken(models.Model):
    """A bearer token for API clients (an API key). Only the SHA-256 of the token is stored.

    ``scopes``: ``read`` (every GET and stream) and ``write`` (what creates, acts or
    deletes), comma-separated; a key with ``write`` has ``read`` too. An expired or revoked
    key authenticates no one (docs/protocols/agui.md, Authentication)."""

    class Scope(models.TextChoices):
        READ = "read"
        WRITE = "write"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, help_text="What the key is for.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(
        max_length=8, editable=False, help_text="First characters, to tell tokens apart."
    )
    scopes = models.CharField(max_length=32, default="read,write", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def scope_list(self) -> list[str]:
        return [scope for scope in self.scopes.split(",") if scope]

    def unusable_because(self, now: datetime) -> str | None:
        """Why the key authenticates no one at ``now`` (``"revoked"``, ``"expired"``), or
        ``None``."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return None

    @staticmethod
    def hash_key(raw_key: str) -> str:
        return hashlib.sha256(raw_key.encode()).hexdigest()


class Stage(models.TextChoices):
    """The stages of a run's pipeline, in the order they run (router → worker → memory)."""

    ROUTER = "router"
    WORKER = "worker"
    MEMORY = "memory"


class Visibility(enum.IntFlag):
    """Consumers of a stored message (docs/spec/sse-events-and-usage.md, section 8).

    ``REASONING`` marks a model's reasoning (its ``reasoning_content``): the history shows it
    only when asked (``?include=reasoning``), and no stage's context holds it, since a
    provider refuses its reasoning sent back to it (DeepSeek answers 400). It is no part of
    ``ALL``."""

    UI_HISTORY = 1
    ROUTER = 2
    WORKER = 4
    MEMORY = 8
    REASONING = 16
    CONTEXT = ROUTER | WORKER | MEMORY
    ALL = UI_HISTORY | CONTEXT


class Thread(models.Model):
    """A conversation; its UUID is the AG-UI ``threadId``."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_threads"
    )
    # Last message seq handed out; bumped under the thread's row lock.
    last_seq = models.PositiveIntegerField(default=0, editable=False)
    # What a client attached to the thread when it created it (an Agent Protocol task's
    # ``additional_input``, its spec ``workspace``), given back as it came.
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "-updated_at"], name="thread_owner_recent")]

    def __str__(self) -> str:
        return str(self.id)


class MultitaskStrategy(models.TextChoices):
    """What a new run does when its thread is busy (a run queued, running or parked, or an
    interrupt open): ``reject`` it (409, nothing written), ``enqueue`` it after the thread's
    runs, ``interrupt`` the run holding the thread's turn (cancelled; the new run goes next,
    before the runs queued behind it), or ``rollback`` (as interrupt, and the cancelled run's
    messages leave the conversation). docs/protocols/multitask.md."""

    REJECT = "reject"
    ENQUEUE = "enqueue"
    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"


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

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="runs")
    run_id = models.CharField(max_length=128)
    parent_run_id = models.CharField(max_length=128, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    runtime_mode = models.CharField(max_length=16, choices=RuntimeMode.choices)
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
    # How many stages it may run before it parks (a client stepping through it), or None:
    # straight through.
    step_budget = models.PositiveIntegerField(null=True, blank=True)
    # Where a parked run goes on: the next stage and what the stages before it gave.
    checkpoint = models.JSONField(null=True, blank=True)
    # Keep the final answer as a file artifact of the thread (the Agent Protocol's tasks).
    answer_artifact = models.BooleanField(default=False)
    # What the protocol request that made the run asked beyond its input (a Responses
    # request's model, instructions, metadata, background…), kept to answer it back.
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
        ]

    def __str__(self) -> str:
        return self.run_id


# A run still to end (it holds its thread's turn), and a run that has ended.
RUN_ACTIVE_STATUSES = (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.PAUSED)
RUN_ENDED_STATUSES = (Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED)


class Message(models.Model):
    """A stored chat message (docs/spec/chat-messages-and-attachments.md, Message Metadata)."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SYSTEM = "system"
        TOOL = "tool"

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="messages")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="messages", null=True)
    seq = models.PositiveIntegerField()
    message_id = models.CharField(max_length=200)
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    content_blocks = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    visibility_mask = models.PositiveSmallIntegerField(default=int(Visibility.ALL))
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "seq"], name="message_unique_seq_per_thread")
        ]
        indexes = [models.Index(fields=["thread", "created_at"], name="message_thread_created")]
        ordering = ["thread", "seq"]

    def __str__(self) -> str:
        return f"{self.thread_id}#{self.seq} {self.role}"


class Interrupt(models.Model):
    """A tool call a run stopped on, waiting for an answer from outside (AG-UI 1.0's
    ``Interrupt``): an approval of a backend tool that requires one, or the result of a
    client's own (frontend) tool. The run ends with its reply held (``Run.suspended_reply``);
    the run that answers every open interrupt of the thread goes on from it. While one is
    pending its thread takes no new user message."""

    class Kind(models.TextChoices):
        APPROVAL = "approval"  # a backend tool that runs once a person approves it
        CLIENT_TOOL = "client_tool"  # a tool of the client's, which the client runs

    class Status(models.TextChoices):
        PENDING = "pending"
        RESOLVED = "resolved"
        CANCELLED = "cancelled"
        EXPIRED = "expired"

    id = models.CharField(primary_key=True, max_length=40)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="interrupts")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="interrupts")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # AG-UI's open ``reason``: ``tool_approval`` for an approval, ``tool_call`` otherwise.
    reason = models.CharField(max_length=64)
    tool_call_id = models.CharField(max_length=255)
    tool_name = models.CharField(max_length=255)
    arguments = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)
    # The JSON schema an answer's payload must meet (an approval's ``approved``…).
    response_schema = models.JSONField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    expires_at = models.DateTimeField()
    # The answer (an approval's payload, a client tool's result), and the run that gave it.
    answer = models.JSONField(null=True, blank=True)
    answered_by = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="answered"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # "Does this thread wait on an interrupt?", asked before every new run.
            models.Index(
                fields=["thread"],
                condition=models.Q(status="pending"),
                name="interrupt_thread_pending",
            ),
            models.Index(
                fields=["expires_at"],
                condition=models.Q(status="pending"),
                name="interrupt_pending_expiry",
            ),
        ]
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.id} {self.tool_name} {self.status}"


class RunEvent(models.Model):
    """One AG-UI event of a run, as sent on the wire (docs/spec/sse-events-and-usage.md).

    The primary key is the SSE event id: it only grows, and a thread's runs execute one at a
    time, so a thread's events are in id order and its journal is a concatenation of whole
    runs. ``seq`` is the event's ordinal within its run (0 for its RUN_STARTED), so a
    protocol's translator numbers a replay exactly as the live stream did.
    """

    # Indexed with the id below: reads are "this thread's (or run's) events in id order".
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
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
