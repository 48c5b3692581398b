"""Writes of runs: creating one (with its thread and user message) and cancelling one."""

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.http import Http404
from django.utils import timezone

from agent_runs import ports
from agent_runs.agent_config import MCP_TOOL_PREFIX, system_agents
from agent_runs.errors import (
    RunIdConflict,
    ToolNameTaken,
)
from agent_runs.models import Message, MultitaskStrategy, Run, Thread
from agent_runs.ports import StoredImage
from agent_runs.run_input import RunAgentInput, snapshot_sha256, user_text
from agent_runs.services.interrupts import (
    Answers,
    interrupts_close,
    interrupts_withdraw,
    turn_answers_check,
)
from agent_runs.services.messages import MessageDraft, messages_append
from agent_runs.services.queue import run_enqueue
from agent_runs.services.rate_limits import rate_limits_on, run_rate_check
from agent_runs.services.run_checks import (
    automation_job_check,
    binary_blocks_resolve,
    conversation_check,
    is_retry,
)
from agent_runs.services.run_request import run_request_with_knobs
from agent_runs.services.run_rows import insert_parts, run_and_message_insert, sql_column, sql_table
from agent_runs.services.run_turns import (
    CANCELLING,
    TurnRule,
    multitask_strategy,
    thread_interrupt,
    turn_check,
    turn_rule,
)
from agent_runs.tracing import with_trace_context

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOptions:
    """How a run goes, beyond its input.

    ``step_budget``: the run is stepped through by its client: it runs this many stages,
    then parks (``paused``) until given more (``run_resume(steps=…)``); 0 parks it before it
    starts. ``answer_artifact``: its final answer is kept as a file artifact of the thread.
    Both are kept in ``Run.request`` (services/run_request.py).
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
    multitask: str | None = None,
    protocol: str = Run.Protocol.AGUI,
) -> Run:
    """Store the thread (if new), the user message and the queued run; enqueue on commit.

    docs/spec/run-agent-input.md, Response. Idempotent per (threadId, runId): the same body
    returns the existing run, a different body raises ``RunIdConflict``. Images are named by
    their storage place in the stored snapshot (never by a signed URL, a credential), so a
    retry with a fresh URL for the same image is the same body.

    The new user message must not be one the thread already has, whichever protocol sent
    it (``ConversationMessageRepeated``, checked under the thread's row lock).
    ``earlier_message_ids``: the run is the next turn of a conversation the client holds
    (AG-UI clients send all of it every turn). Each id must name a message of the thread
    (``ConversationMessageUnknown``); nothing of the earlier messages is stored again.
    The rule of turns (``options.turn``) and the open interrupts: ``_run_create``.

    ``multitask``: a new user message's ``MultitaskStrategy`` (docs/protocols/multitask.md,
    ``run_turns.multitask_strategy``). ``protocol``: the protocol whose request makes it."""
    options = options or RunOptions()
    strategy = multitask_strategy(multitask, options.turn)
    ports.billing().budget_check(user_id=user.pk)
    if rate_limits_on() and not is_retry(user=user, run_input=run_input):
        run_rate_check(user_id=user.pk, adds_active=not run_input.continues_reply)
    draft = _run_draft(
        user=user, run_input=run_input, options=options, strategy=strategy, protocol=protocol
    )
    if (
        connection.vendor == "postgresql"
        and not run_input.continues_reply
        and _passes_on_a_new_thread(options.turn, earlier_message_ids)
    ):
        run = _run_create_with_thread(user=user, draft=draft)
        if run is not None:
            return run
    create = partial(_run_create, user=user, draft=draft, earlier_message_ids=earlier_message_ids)
    try:
        return create()
    except IntegrityError:
        # A concurrent request created the same new thread first: retry once, now under
        # that thread's row lock.
        return create()


@dataclass(frozen=True)
class _RunDraft:
    """A validated run to store: its input, as stored, and how it goes."""

    run_input: RunAgentInput
    snapshot: dict[str, Any]
    input_sha256: str
    images: list[StoredImage]
    automation_job: str
    options: RunOptions
    strategy: MultitaskStrategy
    protocol: str

    def run(self, *, thread: Thread, created_thread: bool, continues: Run | None = None) -> Run:
        props = self.run_input.forwarded_props
        answers = self.run_input.continues_reply
        return Run(
            thread=thread,
            continues=continues,
            run_id=self.run_input.run_id,
            parent_run_id=self.run_input.parent_run_id or "",
            runtime_mode=props.runtime_mode,
            protocol=self.protocol,
            input=self.snapshot,
            input_sha256=self.input_sha256,
            client_time=props.client_time.model_dump() if props.client_time else None,
            automation_job=self.automation_job,
            created_thread=created_thread,
            # Parked before it starts: it waits for its first step (no job until then).
            status=Run.Status.PAUSED if self.options.step_budget == 0 else Run.Status.QUEUED,
            request=with_trace_context(
                run_request_with_knobs(
                    self.options.request,
                    step_budget=self.options.step_budget,
                    answer_artifact=self.options.answer_artifact,
                )
            ),
            multitask="" if answers else self.strategy,
            jumps_queue=not answers and self.strategy in CANCELLING,
        )

    def user_message(self, *, run_id: str) -> MessageDraft:
        message = self.run_input.user_message
        blocks = [] if isinstance(message.content, str) else self.snapshot["messages"][0]["content"]
        return MessageDraft(
            role=Message.Role.USER,
            message_id=message.id,
            content=user_text(message.content),
            content_blocks=blocks,
            metadata={
                "run_id": run_id,
                "message_id": message.id,
                **ports.attachments().images_metadata(self.images),
            },
        )

    def user_message_row(self, *, thread: Thread, run: Run) -> Message:
        """The run's user message as a new row (its ``run`` and ``seq`` set by the insert)."""
        return self.user_message(run_id=run.run_id).message(thread=thread, run=None, seq=0)


def _run_draft(
    *,
    user: AbstractBaseUser,
    run_input: RunAgentInput,
    options: RunOptions,
    strategy: MultitaskStrategy,
    protocol: str,
) -> _RunDraft:
    """The run as it will be stored, once its input's checks that need no lock pass: its
    client tools' names, its images (``AttachmentUrlInvalid``), its automation job."""
    _client_tools_check(run_input)
    snapshot = run_input.snapshot()
    images = binary_blocks_resolve(user=user, snapshot=snapshot)
    automation_job = ""
    if run_input.forwarded_props.runtime_mode == Run.RuntimeMode.AUTOMATION:
        automation_job = automation_job_check(user=user, run_input=run_input)
    return _RunDraft(
        run_input=run_input,
        snapshot=snapshot,
        input_sha256=snapshot_sha256(snapshot),
        images=images,
        automation_job=automation_job,
        options=options,
        strategy=strategy,
        protocol=protocol,
    )


def _passes_on_a_new_thread(
    turn: TurnRule | None, earlier_message_ids: Sequence[str] | None
) -> bool:
    """Whether the run's rules hold for a thread with nothing in it: no run to come after,
    no earlier message to name."""
    return (turn is None or turn.after_run_id is None) and not earlier_message_ids


def _run_create_with_thread(*, user: AbstractBaseUser, draft: _RunDraft) -> Run | None:
    """The thread, its run and its user message in one statement (atomic on its own, so no
    transaction is opened for it; on PostgreSQL); ``None``, having stored nothing, when the
    thread exists (or a concurrent request is creating it: the statement waits for that
    one's end), and ``_run_create`` then takes the thread's row lock."""
    thread = Thread(
        id=draft.run_input.thread_id,
        owner_id=user.pk,
        metadata=draft.options.thread_metadata,
        last_seq=1,
    )
    columns, values, params = insert_parts(thread)
    thread_write = (
        f"INSERT INTO {sql_table(Thread)} ({columns}) VALUES ({values}) "
        f"ON CONFLICT ({sql_column(Thread, 'id')}) DO NOTHING"
    )
    run = draft.run(thread=thread, created_thread=True)
    message = draft.user_message_row(thread=thread, run=run)
    if not run_and_message_insert(
        thread=thread, run=run, message=message, thread_write=(thread_write, params)
    ):
        return None
    thread._state.adding = False
    thread._state.db = connection.alias
    _enqueue_on_commit(run)
    return run


def _run_create(
    *,
    user: AbstractBaseUser,
    draft: _RunDraft,
    earlier_message_ids: Sequence[str] | None,
) -> Run:
    """The run of a thread that exists (or is created here), under the thread's row lock:
    a retry answers the run it repeats; then the rule of turns and the conversation are
    checked (after the retry is recognised: a retry of a run that exists answers that run,
    even though the run itself now makes its thread busy);
    the thread's open interrupts (services/interrupts.py) are answered by a run that
    answers them (``run_input.continues_reply``: no message of its own, it goes on with the
    reply they held, ``Run.continues``, and closes them), and refuse a new user message
    (unless its strategy cancels the run holding the turn)."""
    with transaction.atomic():
        run_input, options = draft.run_input, draft.options
        thread, thread_created = _thread_lock_or_create(
            user=user, thread_id=run_input.thread_id, metadata=options.thread_metadata
        )
        if not thread_created:
            existing = Run.objects.filter(thread=thread, run_id=run_input.run_id).first()
            if existing is not None:
                if existing.input_sha256 != draft.input_sha256:
                    raise RunIdConflict()
                return existing
        new_message = not run_input.continues_reply
        rule = turn_rule(options.turn, draft.strategy) if new_message else options.turn
        if rule is not None:
            turn_check(thread=thread, rule=rule)
        answers = _turn_answers(thread=thread, draft=draft, earlier_message_ids=earlier_message_ids)
        run = draft.run(thread=thread, created_thread=thread_created, continues=answers.continues)
        _run_store(thread=thread, run=run, draft=draft)
        interrupts_close(answers=answers, run=run)
        _enqueue_on_commit(run)
        return run


def _turn_answers(
    *, thread: Thread, draft: _RunDraft, earlier_message_ids: Sequence[str] | None
) -> Answers:
    """The conversation checked, and what the run answers of the thread's open interrupts;
    a strategy that cancels the run holding the turn withdraws them and cancels it first."""
    run_input = draft.run_input
    fresh_answers = conversation_check(
        thread=thread,
        new_message_id=None if run_input.continues_reply else run_input.user_message.id,
        earlier_message_ids=earlier_message_ids or (),
        tool_message_ids=[message.id for message in run_input.tool_answers],
    )
    cancelling = not run_input.continues_reply and draft.strategy in CANCELLING
    waited = interrupts_withdraw(thread=thread, strategy=draft.strategy) if cancelling else set()
    answers = turn_answers_check(thread=thread, run_input=run_input, tool_message_ids=fresh_answers)
    if cancelling:
        thread_interrupt(
            thread=thread, rollback=draft.strategy == MultitaskStrategy.ROLLBACK, waited=waited
        )
    return answers


def _run_store(*, thread: Thread, run: Run, draft: _RunDraft) -> None:
    """Insert the run and its user message (on PostgreSQL one statement with the thread's
    ``last_seq``); a run that answers the thread's open interrupts has no message."""
    if draft.run_input.continues_reply:
        run.save(force_insert=True)
    elif connection.vendor == "postgresql":
        thread_write = (
            f"UPDATE {sql_table(Thread)} SET {sql_column(Thread, 'last_seq')} = "
            f"{sql_column(Thread, 'last_seq')} + 1, {sql_column(Thread, 'updated_at')} = %s "
            f"WHERE {sql_column(Thread, 'id')} = %s",
            [timezone.now(), Thread._meta.pk.get_db_prep_value(thread.pk, connection)],
        )
        message = draft.user_message_row(thread=thread, run=run)
        run_and_message_insert(thread=thread, run=run, message=message, thread_write=thread_write)
    else:
        run.save(force_insert=True)
        messages_append(thread=thread, run=run, drafts=[draft.user_message(run_id=run.run_id)])


def _enqueue_on_commit(run: Run) -> None:
    if run.status == Run.Status.QUEUED:
        transaction.on_commit(partial(run_enqueue, run=run))


def client_tool_names_taken() -> list[str]:
    """The names a client's own tool may not take: the backend tools', and that of the
    tool through which the worker answers."""
    return sorted({*system_agents().known_tools, "GenerateStructuredOutput"})


def _client_tools_check(run_input: RunAgentInput) -> None:
    """The client's own tools may not take a taken name (``client_tool_names_taken``), nor
    start with the ``mcp__`` prefix of MCP servers' tools."""
    taken = set(client_tool_names_taken())
    for tool in run_input.tools:
        if tool.name in taken or tool.name.startswith(MCP_TOOL_PREFIX):
            raise ToolNameTaken(tool.name)


def _thread_lock_or_create(
    *, user: AbstractBaseUser, thread_id: Any, metadata: dict[str, Any]
) -> tuple[Thread, bool]:
    thread = Thread.objects.select_for_update().filter(pk=thread_id).first()
    if thread is None:
        return Thread.objects.create(id=thread_id, owner_id=user.pk, metadata=metadata), True
    if thread.owner_id != user.pk:
        raise Http404
    return thread, False
