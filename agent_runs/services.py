"""Writes of the run API: threads, messages, runs, and putting runs on the queue."""

import logging
import secrets
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

import django_rq
from ag_ui.core import RunErrorEvent, RunStartedEvent
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.http import Http404
from django.utils import timezone
from redis.exceptions import RedisError
from rq import Callback, Queue
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus

from agent_runs import selectors
from agent_runs.errors import RunIdConflict, RunInputInvalid, RunNoLongerRunning
from agent_runs.event_log import RunEventEmitter
from agent_runs.models import ApiToken, Message, Run, Thread, UserMemory, Visibility
from agent_runs.runtime_config import automation_job_for
from agent_runs.schemas import RunAgentInput, TaskAcceptedResponse, snapshot_sha256, user_text
from attachments.models import Attachment
from attachments.schemas import user_message_attachments_metadata
from attachments.selectors import attachment_from_signed_url

logger = logging.getLogger(__name__)

RUN_JOB = "agent_runs.jobs.run_execute_job"
RUN_JOB_FAILED = "agent_runs.jobs.run_job_failed"


def run_create(*, user: AbstractBaseUser, run_input: RunAgentInput) -> Run:
    """Store the thread (if new), the user message and the queued run; enqueue on commit.

    spec/run-agent-input.md, Response. Idempotent per (threadId, runId): the same body
    returns the existing run, a different body raises ``RunIdConflict``. Images are named by
    their storage place in the stored snapshot (never by a signed URL, a credential), so a
    retry with a fresh URL for the same image is the same body.
    """
    snapshot = run_input.snapshot()
    images = _binary_blocks_resolve(user=user, snapshot=snapshot)
    try:
        return _run_create(user=user, run_input=run_input, snapshot=snapshot, images=images)
    except IntegrityError:
        # A concurrent request created the same new thread first: retry once, now under
        # that thread's row lock.
        return _run_create(user=user, run_input=run_input, snapshot=snapshot, images=images)


@transaction.atomic
def _run_create(
    *,
    user: AbstractBaseUser,
    run_input: RunAgentInput,
    snapshot: dict[str, Any],
    images: list[Attachment],
) -> Run:
    input_sha256 = snapshot_sha256(snapshot)
    if run_input.forwarded_props.runtime_mode == Run.RuntimeMode.AUTOMATION:
        _automation_job_check(snapshot)
    thread, thread_created = _thread_lock_or_create(user=user, thread_id=run_input.thread_id)
    if not thread_created:
        existing = Run.objects.filter(thread=thread, run_id=run_input.run_id).first()
        if existing is not None:
            if existing.input_sha256 != input_sha256:
                raise RunIdConflict()
            return existing
    props = run_input.forwarded_props
    run = Run.objects.create(
        thread=thread,
        run_id=run_input.run_id,
        parent_run_id=run_input.parent_run_id or "",
        runtime_mode=props.runtime_mode,
        input=snapshot,
        input_sha256=input_sha256,
        client_time=props.client_time.model_dump() if props.client_time else None,
        created_thread=thread_created,
    )
    message = run_input.user_message
    blocks = [] if isinstance(message.content, str) else snapshot["messages"][0]["content"]
    user_message = MessageDraft(
        role=Message.Role.USER,
        message_id=message.id,
        content=user_text(message.content),
        content_blocks=blocks,
        metadata={
            "run_id": run.run_id,
            "message_id": message.id,
            **user_message_attachments_metadata(images),
        },
    )
    messages_append(thread=thread, run=run, drafts=[user_message])
    transaction.on_commit(partial(run_enqueue, run=run))
    return run


def _binary_blocks_resolve(*, user: AbstractBaseUser, snapshot: dict[str, Any]) -> list[Attachment]:
    """Turn each image's signed URL in the snapshot's user message into its storage place
    (``bucket``, ``path``, the sniffed ``mimeType``), and give the attachments, in order
    (spec/run-agent-input.md, Compatibility Notes). A URL that is not a valid, unexpired
    signed URL of an object of the caller's is an ``AttachmentUrlInvalid`` (422), before
    anything is stored."""
    content = snapshot["messages"][0].get("content")
    if not isinstance(content, list):
        return []
    images: list[Attachment] = []
    for index, block in enumerate(content):
        if block.get("type") != "binary":
            continue
        image = attachment_from_signed_url(user=user, url=block["url"])
        images.append(image)
        kept = {key: value for key, value in block.items() if key != "url"}
        content[index] = {
            **kept,
            "mimeType": image.mime_type,
            "bucket": image.bucket,
            "path": image.path,
        }
    return images


def _automation_job_check(snapshot: dict[str, Any]) -> None:
    try:
        automation_job_for(run_input=snapshot)
    except ImproperlyConfigured:
        raise RunInputInvalid(
            "invalid RunAgentInput.context: an automation run names an existing job as "
            '{"description": "automation_job", "value": "<job name>"}'
        ) from None


def _thread_lock_or_create(*, user: AbstractBaseUser, thread_id: Any) -> tuple[Thread, bool]:
    thread = Thread.objects.select_for_update().filter(pk=thread_id).first()
    if thread is None:
        return Thread.objects.create(id=thread_id, owner_id=user.pk), True
    if thread.owner_id != user.pk:
        raise Http404
    return thread, False


@dataclass(frozen=True)
class MessageDraft:
    """A message to append to a thread (its ``seq`` comes from the thread)."""

    role: Message.Role
    message_id: str
    content: str
    content_blocks: list[Any] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    visibility: Visibility = Visibility.ALL


def messages_append(*, thread: Thread, run: Run | None, drafts: Sequence[MessageDraft]) -> None:
    """Append messages with the thread's next ``seq`` numbers, in two statements however
    many there are. The caller holds the thread's row lock (``select_for_update``, or it
    created the thread) inside a transaction."""
    first_seq = thread.last_seq + 1
    thread.last_seq += len(drafts)
    thread.save(update_fields=["last_seq", "updated_at"])
    Message.objects.bulk_create(
        [
            Message(
                thread=thread,
                run=run,
                seq=first_seq + index,
                message_id=draft.message_id,
                role=draft.role,
                content=draft.content,
                content_blocks=draft.content_blocks,
                metadata=draft.metadata,
                visibility_mask=int(draft.visibility),
            )
            for index, draft in enumerate(drafts)
        ]
    )


@cache
def runs_queue() -> Queue:
    """The runs queue, made once per process so its Redis connection pool is reused
    (redis-py pools are thread-safe)."""
    return django_rq.get_queue(settings.AGENT_RUNS_QUEUE)


def run_enqueue(*, run: Run) -> None:
    """Put the run's job on the queue. Redis being down loses nothing: the run stays
    ``queued`` in the database and the worker's recovery enqueues it again."""
    try:
        runs_queue().enqueue(
            RUN_JOB,
            run.pk,
            job_id=str(run.task_id),
            job_timeout=settings.AGENT_RUN_JOB_TIMEOUT,
            on_failure=Callback(RUN_JOB_FAILED),
            result_ttl=3600,
            failure_ttl=7 * 24 * 3600,
        )
    except RedisError:
        logger.exception("could not enqueue run %s; it stays queued for recovery", run.pk)


def run_dispatch_next(*, thread_id: uuid.UUID) -> bool:
    """Enqueue the thread's oldest queued run, whose job may have found it not its turn.
    Returns whether a job was enqueued."""
    run = selectors.run_next_queued(thread_id=thread_id)
    return run is not None and run_enqueue_if_idle(run=run)


_PENDING_JOB_STATUSES = {
    JobStatus.QUEUED,
    JobStatus.STARTED,
    JobStatus.DEFERRED,
    JobStatus.SCHEDULED,
}


def run_enqueue_if_idle(*, run: Run) -> bool:
    """Enqueue the run's job again unless it is still waiting or working (a second copy
    would only find the run claimed); when Redis lost the job, enqueue it anew."""
    return runs_enqueue_if_idle(runs=[run]) == 1


def runs_enqueue_if_idle(*, runs: Sequence[Run]) -> int:
    """``run_enqueue_if_idle`` for many runs, their jobs looked up in one round trip (a
    worker's recovery after Redis lost a backlog). Returns how many were enqueued."""
    if not runs:
        return 0
    try:
        jobs = Job.fetch_many(
            [str(run.task_id) for run in runs], connection=runs_queue().connection
        )
    except RedisError:
        logger.warning("could not look up the jobs of %d runs", len(runs), exc_info=True)
        return 0
    enqueued = 0
    for run, job in zip(runs, jobs, strict=True):
        if job is not None and job.get_status(refresh=False) in _PENDING_JOB_STATUSES:
            continue
        run_enqueue(run=run)
        enqueued += 1
    return enqueued


RUN_CANCELLED_CODE = "cancelled"
_STOP_WAIT_SECONDS = 2.0


def run_cancel(*, run: Run) -> Run:
    """Cancel a run: a queued run never starts; a running run's job is stopped (its
    model call in flight cancelled) before the run's stream is ended with
    ``RUN_ERROR`` ``code: "cancelled"``, told apart from a failure by its code. A run that
    has already ended is left as it is, so cancelling twice is harmless."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        was_running = locked.status == Run.Status.RUNNING
        ended = locked.status in (Run.Status.QUEUED, Run.Status.RUNNING)
        if ended:
            Run.objects.filter(pk=run.pk).update(
                status=Run.Status.CANCELLED, finished_at=timezone.now()
            )
    if ended:
        if was_running:
            _job_stop(job_id=str(run.task_id))
        emitter = RunEventEmitter(run=run, resume=True)
        ids = {"threadId": str(run.thread_id), "runId": run.run_id}
        if not emitter.started:
            emitter.emit(RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id))
        if not emitter.ended:
            emitter.emit(RunErrorEvent(message="run cancelled", code=RUN_CANCELLED_CODE, **ids))
        run_dispatch_next(thread_id=run.thread_id)
    run.refresh_from_db()
    return run


def _job_stop(*, job_id: str) -> None:
    """Have the worker stop the job (agent_runs/job_stop.py), and wait (briefly) until it
    has, so the job emits nothing after the run's terminal event."""
    connection = runs_queue().connection
    try:
        send_stop_job_command(connection, job_id)
    except (InvalidJobOperation, NoSuchJobError, RedisError):
        return  # not executing (any more), or Redis lost it: nothing to stop
    deadline = time.monotonic() + _STOP_WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            if Job.fetch(job_id, connection=connection).get_status() != JobStatus.STARTED:
                return
        except (NoSuchJobError, RedisError):
            return
        time.sleep(0.02)
    logger.warning("job %s did not stop within %.1f s", job_id, _STOP_WAIT_SECONDS)


def task_accepted_response(*, run: Run) -> TaskAcceptedResponse:
    return TaskAcceptedResponse(
        task_id=str(run.task_id),
        thread_id=str(run.thread_id),
        run_id=run.run_id,
        created=run.created_thread,
    )


@transaction.atomic
def api_token_create(*, username: str) -> str:
    """Create the user if missing and a new API token for it; return the raw token, which
    is shown once and stored only as a hash."""
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    raw_key = secrets.token_urlsafe(32)
    ApiToken.objects.create(user=user, key_hash=ApiToken.hash_key(raw_key), prefix=raw_key[:8])
    return raw_key


def user_memory_add(*, user_id: int, content: str, kind: str, run_pk: int | None) -> UserMemory:
    """Keep one fact or preference about the user (the memory stage's write). The same text
    is kept once, and only the newest ``AGENT_MEMORY_MAX_ITEMS`` are kept."""
    content = " ".join(content.split())[:500]
    if not content:
        raise ValueError("content is empty")
    if kind not in UserMemory.Kind.values:
        raise ValueError(f"kind must be one of {UserMemory.Kind.values}")
    with transaction.atomic():
        # Remembered again: it is news again, so it is the last to go.
        memory, _ = UserMemory.objects.update_or_create(
            owner_id=user_id,
            content=content,
            defaults={"kind": kind, "source_run_id": run_pk, "created_at": timezone.now()},
        )
        stale = UserMemory.objects.filter(owner_id=user_id).order_by("-created_at", "-pk")[
            settings.AGENT_MEMORY_MAX_ITEMS :
        ]
        UserMemory.objects.filter(pk__in=list(stale.values_list("pk", flat=True))).delete()
    return memory


def user_memory_forget(*, user_id: int, memory_id: int) -> bool:
    """Forget one of the user's memories; False when the user has no such memory."""
    deleted, _ = UserMemory.objects.filter(pk=memory_id, owner_id=user_id).delete()
    return deleted > 0


@dataclass(frozen=True)
class ToolResult:
    """One tool call of a stage, as its tool message keeps it."""

    tool_call_id: str
    tool_name: str
    args: str
    result: str


@dataclass(frozen=True)
class StageAnswer:
    """The assistant message a stage answered with."""

    message_id: str
    content: str
    metadata: dict[str, Any]


@transaction.atomic
def run_stage_messages_store(
    *, run: Run, stage: str, tool_results: Sequence[ToolResult], answer: StageAnswer | None
) -> None:
    """A stage's tool results (kept for the stages' context, never shown in the history) and
    its answer, in one transaction, while the run is still running: a run cancelled
    meanwhile keeps nothing (``RunNoLongerRunning``). spec/chat-messages-and-attachments.md,
    Message Metadata."""
    # One statement locks both rows: the run (against a cancel) and its thread (for seq).
    thread = (
        Thread.objects.select_for_update()
        .filter(pk=run.thread_id, runs__pk=run.pk, runs__status=Run.Status.RUNNING)
        .first()
    )
    if thread is None:
        raise RunNoLongerRunning(run.pk)
    drafts = [
        MessageDraft(
            role=Message.Role.TOOL,
            message_id=tool.tool_call_id,
            content=tool.result,
            metadata={
                "run_id": run.run_id,
                "stage": stage,
                "message_id": tool.tool_call_id,
                "tool_name": tool.tool_name,
                "tool_call_args": tool.args,
            },
            visibility=Visibility.CONTEXT,
        )
        for tool in tool_results
    ]
    if answer is not None:
        drafts.append(
            MessageDraft(
                role=Message.Role.ASSISTANT,
                message_id=answer.message_id,
                content=answer.content,
                metadata=answer.metadata,
            )
        )
    if drafts:
        messages_append(thread=thread, run=run, drafts=drafts)
