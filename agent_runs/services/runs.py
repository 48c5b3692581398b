"""Writes of runs: creating one (with its thread and user message) and cancelling one."""

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.http import Http404

from agent_runs.agent_config import automation_job_get
from agent_runs.errors import (
    ConversationMessageRepeated,
    ConversationMessageUnknown,
    RunIdConflict,
    RunInputInvalid,
    RunNotLatest,
    ThreadBusy,
)
from agent_runs.models import RUN_ACTIVE_STATUSES, Message, Run, Thread
from agent_runs.run_input import RunAgentInput, snapshot_sha256, user_text
from agent_runs.selectors.messages import thread_message_ids_known
from agent_runs.services.messages import MessageDraft, messages_append
from agent_runs.services.queue import run_enqueue
from attachments.models import Attachment
from attachments.schemas import user_message_attachments_metadata
from attachments.selectors import attachment_from_signed_url

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnRule:
    """What the thread's runs must be for a new run to be created, checked in
    ``run_create``'s transaction once it holds the thread's row lock: runs are created only
    under that lock, so of two requests at once the second sees the first's run.

    ``chain``: the runs looked at are the run whose runId it is and the runs whose parent it
    is (an A2A task) rather than all the thread's. ``after_run_id``: the latest of them must
    be this run, the one the new run answers (``RunNotLatest``). ``idle``: none of them may
    be queued, running or paused (``ThreadBusy``)."""

    after_run_id: str | None = None
    idle: bool = True
    chain: str | None = None


@dataclass(frozen=True)
class RunOptions:
    """How a run goes, beyond its input.

    ``step_budget``: the run is stepped through by its client: it runs this many stages,
    then parks (``paused``) until given more (``run_resume(steps=…)``); 0 parks it before it
    starts. ``answer_artifact``: its final answer is kept as a file artifact of the thread.
    ``thread_metadata``: kept with the thread when the run creates it. ``request``: what the
    protocol request asked beyond the input (``Run.request``). ``turn``: the run is
    refused unless its thread's runs meet this rule (``TurnRule``)."""

    step_budget: int | None = None
    answer_artifact: bool = False
    thread_metadata: dict[str, Any] = field(default_factory=dict)
    request: dict[str, Any] = field(default_factory=dict)
    turn: TurnRule | None = None


def run_create(
    *,
    user: AbstractBaseUser,
    run_input: RunAgentInput,
    earlier_message_ids: Sequence[str] | None = None,
    options: RunOptions | None = None,
) -> Run:
    """Store the thread (if new), the user message and the queued run; enqueue on commit.

    docs/spec/run-agent-input.md, Response. Idempotent per (threadId, runId): the same body
    returns the existing run, a different body raises ``RunIdConflict``. Images are named by
    their storage place in the stored snapshot (never by a signed URL, a credential), so a
    retry with a fresh URL for the same image is the same body.

    ``earlier_message_ids``: the run is the next turn of a conversation the client holds
    (AG-UI clients send all of it every turn). Each id must name a message of the thread
    (``ConversationMessageUnknown``), and the new user message must not be one
    (``ConversationMessageRepeated``); nothing of the earlier messages is stored again.

    ``options.turn`` is checked after the retry is recognised: a retry of a run that exists
    answers that run, even though the run itself now makes its thread busy.
    """
    snapshot = run_input.snapshot()
    images = _binary_blocks_resolve(user=user, snapshot=snapshot)
    create = partial(
        _run_create,
        user=user,
        run_input=run_input,
        snapshot=snapshot,
        images=images,
        earlier_message_ids=earlier_message_ids,
        options=options or RunOptions(),
    )
    try:
        return create()
    except IntegrityError:
        # A concurrent request created the same new thread first: retry once, now under
        # that thread's row lock.
        return create()


@transaction.atomic
def _run_create(
    *,
    user: AbstractBaseUser,
    run_input: RunAgentInput,
    snapshot: dict[str, Any],
    images: list[Attachment],
    earlier_message_ids: Sequence[str] | None,
    options: RunOptions,
) -> Run:
    input_sha256 = snapshot_sha256(snapshot)
    automation_job = ""
    if run_input.forwarded_props.runtime_mode == Run.RuntimeMode.AUTOMATION:
        automation_job = _automation_job_check(run_input)
    thread, thread_created = _thread_lock_or_create(
        user=user, thread_id=run_input.thread_id, metadata=options.thread_metadata
    )
    if not thread_created:
        existing = Run.objects.filter(thread=thread, run_id=run_input.run_id).first()
        if existing is not None:
            if existing.input_sha256 != input_sha256:
                raise RunIdConflict()
            return existing
    if options.turn is not None:
        _turn_check(thread=thread, rule=options.turn)
    if earlier_message_ids is not None:
        _conversation_check(
            thread=thread,
            new_message_id=run_input.user_message.id,
            earlier_message_ids=earlier_message_ids,
        )
    props = run_input.forwarded_props
    run = Run.objects.create(
        thread=thread,
        run_id=run_input.run_id,
        parent_run_id=run_input.parent_run_id or "",
        runtime_mode=props.runtime_mode,
        input=snapshot,
        input_sha256=input_sha256,
        client_time=props.client_time.model_dump() if props.client_time else None,
        automation_job=automation_job,
        created_thread=thread_created,
        # Parked before it starts: it waits for its first step (no job until then).
        status=Run.Status.PAUSED if options.step_budget == 0 else Run.Status.QUEUED,
        step_budget=options.step_budget,
        answer_artifact=options.answer_artifact,
        request=options.request,
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
    if run.status == Run.Status.QUEUED:
        transaction.on_commit(partial(run_enqueue, run=run))
    return run


def _turn_check(*, thread: Thread, rule: TurnRule) -> None:
    """The thread's runs meet ``rule``; the caller holds the thread's row lock (in READ
    COMMITTED each query sees every run committed before the lock was granted)."""
    runs = Run.objects.filter(thread=thread)
    if rule.chain is not None:
        runs = runs.filter(Q(run_id=rule.chain) | Q(parent_run_id=rule.chain))
    if rule.after_run_id is not None:
        latest = runs.order_by("-created_at", "-pk").values_list("run_id", flat=True).first()
        if latest != rule.after_run_id:
            raise RunNotLatest(rule.after_run_id)
    if rule.idle and runs.filter(status__in=RUN_ACTIVE_STATUSES).exists():
        raise ThreadBusy()


def _conversation_check(
    *, thread: Thread, new_message_id: str, earlier_message_ids: Sequence[str]
) -> None:
    """The client's conversation is this thread's, and its last user message is new."""
    known = thread_message_ids_known(
        thread_id=thread.pk, ids={new_message_id, *earlier_message_ids}
    )
    if new_message_id in known:
        raise ConversationMessageRepeated(new_message_id)
    for message_id in earlier_message_ids:
        if message_id not in known:
            raise ConversationMessageUnknown(message_id)


def _binary_blocks_resolve(*, user: AbstractBaseUser, snapshot: dict[str, Any]) -> list[Attachment]:
    """Turn each image's signed URL in the snapshot's user message into its storage place
    (``bucket``, ``path``, the sniffed ``mimeType``), and give the attachments, in order
    (docs/spec/run-agent-input.md, Compatibility Notes). A URL that is not a valid, unexpired
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


def _automation_job_check(run_input: RunAgentInput) -> str:
    """The automation job an ``automation`` run names; one that does not exist is a 422."""
    name = run_input.automation_job
    if automation_job_get(name=name) is None:
        raise RunInputInvalid(
            "invalid RunAgentInput.context: an automation run names an existing job as "
            '{"description": "automation_job", "value": "<job name>"}'
        )
    return name


def _thread_lock_or_create(
    *, user: AbstractBaseUser, thread_id: Any, metadata: dict[str, Any]
) -> tuple[Thread, bool]:
    thread = Thread.objects.select_for_update().filter(pk=thread_id).first()
    if thread is None:
        return Thread.objects.create(id=thread_id, owner_id=user.pk, metadata=metadata), True
    if thread.owner_id != user.pk:
        raise Http404
    return thread, False
