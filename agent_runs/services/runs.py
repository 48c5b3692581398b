"""Writes of runs: creating one (with its thread and user message) and cancelling one."""

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache, partial
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import Field, Model, Q
from django.http import Http404
from django.utils import timezone

from agent_runs.agent_config import MCP_TOOL_PREFIX, automation_job_get, system_agents
from agent_runs.errors import (
    ConversationMessageRepeated,
    ConversationMessageUnknown,
    MultitaskInvalid,
    RunIdConflict,
    RunInputInvalid,
    RunNotLatest,
    ThreadBusy,
    ToolNameTaken,
)
from agent_runs.events.reads import thread_message_ids_known
from agent_runs.models import RUN_ACTIVE_STATUSES, Message, MultitaskStrategy, Run, Thread
from agent_runs.run_input import RunAgentInput, snapshot_sha256, user_text
from agent_runs.services.interrupts import (
    interrupts_close,
    interrupts_withdraw,
    turn_answers_check,
)
from agent_runs.services.lifecycle import runs_cancel_in_turn
from agent_runs.services.messages import MessageDraft, messages_append
from agent_runs.services.queue import run_enqueue
from agent_runs.services.rate_limits import rate_limits_on, run_rate_check
from attachments.models import Attachment
from attachments.schemas import user_message_attachments_metadata
from attachments.selectors import attachment_from_signed_url
from billing.budgets import budget_check
from config.tracing import with_trace_context

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
    multitask: str | None = None,
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

    ``options.turn`` is checked after the retry is recognised: a retry of a run that exists
    answers that run, even though the run itself now makes its thread busy.

    The thread's open interrupts (services/interrupts.py) are checked under the same lock:
    a run that answers them (``run_input.continues_reply``) stores no message, goes on with
    the reply they held (``Run.continues``) and closes them; a new user message is refused
    while one is open.

    On PostgreSQL a new thread, its run and its message are one statement (which inserts
    nothing when the thread exists; the thread's row lock is then taken as below), and a
    run of a thread that exists is one statement after its checks.

    ``multitask``: what a new user message does when its thread is busy (a run queued,
    running or parked, or an interrupt open), a ``MultitaskStrategy`` value; ``None``: the
    ``MULTITASK_DEFAULT`` setting, else the entry point's own (``reject`` when
    ``options.turn`` asks for an idle thread, else ``enqueue``). docs/protocols/multitask.md.
    """
    options = options or RunOptions()
    strategy = _multitask_strategy(multitask, options.turn)
    budget_check(user_id=user.pk)
    if rate_limits_on() and not _is_retry(user=user, run_input=run_input):
        run_rate_check(user_id=user.pk, adds_active=not run_input.continues_reply)
    _client_tools_check(run_input)
    snapshot = run_input.snapshot()
    images = _binary_blocks_resolve(user=user, snapshot=snapshot)
    automation_job = ""
    if run_input.forwarded_props.runtime_mode == Run.RuntimeMode.AUTOMATION:
        automation_job = _automation_job_check(user=user, run_input=run_input)
    draft = _RunDraft(
        run_input=run_input,
        snapshot=snapshot,
        input_sha256=snapshot_sha256(snapshot),
        images=images,
        automation_job=automation_job,
        options=options,
        strategy=strategy,
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
    images: list[Attachment]
    automation_job: str
    options: RunOptions
    strategy: MultitaskStrategy

    def run(self, *, thread: Thread, created_thread: bool, continues: Run | None = None) -> Run:
        props = self.run_input.forwarded_props
        answers = self.run_input.continues_reply
        return Run(
            thread=thread,
            continues=continues,
            run_id=self.run_input.run_id,
            parent_run_id=self.run_input.parent_run_id or "",
            runtime_mode=props.runtime_mode,
            input=self.snapshot,
            input_sha256=self.input_sha256,
            client_time=props.client_time.model_dump() if props.client_time else None,
            automation_job=self.automation_job,
            created_thread=created_thread,
            # Parked before it starts: it waits for its first step (no job until then).
            status=Run.Status.PAUSED if self.options.step_budget == 0 else Run.Status.QUEUED,
            step_budget=self.options.step_budget,
            answer_artifact=self.options.answer_artifact,
            request=with_trace_context(self.options.request),
            multitask="" if answers else self.strategy,
            jumps_queue=not answers and self.strategy in _CANCELLING,
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
                **user_message_attachments_metadata(self.images),
            },
        )


def _passes_on_a_new_thread(
    turn: TurnRule | None, earlier_message_ids: Sequence[str] | None
) -> bool:
    """Whether the run's rules hold for a thread with nothing in it: no run to come after,
    no earlier message to name."""
    return (turn is None or turn.after_run_id is None) and not earlier_message_ids


def _run_create_with_thread(*, user: AbstractBaseUser, draft: _RunDraft) -> Run | None:
    """The thread, its run and its user message in one statement (atomic on its own, so no
    transaction is opened for it); ``None``, having stored nothing, when the thread exists
    (or a concurrent request is creating it: the statement waits for that one's end)."""
    thread = Thread(
        id=draft.run_input.thread_id,
        owner_id=user.pk,
        metadata=draft.options.thread_metadata,
        last_seq=1,
    )
    columns, values, params = _insert_parts(thread)
    thread_write = (
        f"INSERT INTO {_table(Thread)} ({columns}) VALUES ({values}) "
        f"ON CONFLICT ({_column(Thread, 'id')}) DO NOTHING"
    )
    run = draft.run(thread=thread, created_thread=True)
    if not _run_and_message_insert(
        thread=thread, run=run, draft=draft, thread_write=(thread_write, params)
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
        rule = _turn_rule(options.turn, draft.strategy) if new_message else options.turn
        if rule is not None:
            _turn_check(thread=thread, rule=rule)
        fresh_answers = _conversation_check(
            thread=thread,
            new_message_id=None if run_input.continues_reply else run_input.user_message.id,
            earlier_message_ids=earlier_message_ids or (),
            tool_message_ids=[message.id for message in run_input.tool_answers],
        )
        cancelling = new_message and draft.strategy in _CANCELLING
        waited = (
            interrupts_withdraw(thread=thread, strategy=draft.strategy) if cancelling else set()
        )
        answers = turn_answers_check(
            thread=thread, run_input=run_input, tool_message_ids=fresh_answers
        )
        if cancelling:
            _thread_interrupt(
                thread=thread,
                rollback=draft.strategy == MultitaskStrategy.ROLLBACK,
                waited=waited,
            )
        run = draft.run(thread=thread, created_thread=thread_created, continues=answers.continues)
        if run_input.continues_reply:
            # It answers the thread's open interrupts: no message of its own.
            run.save(force_insert=True)
        elif connection.vendor == "postgresql":
            thread_write = (
                f"UPDATE {_table(Thread)} SET {_column(Thread, 'last_seq')} = "
                f"{_column(Thread, 'last_seq')} + 1, {_column(Thread, 'updated_at')} = %s "
                f"WHERE {_column(Thread, 'id')} = %s",
                [timezone.now(), Thread._meta.pk.get_db_prep_value(thread.pk, connection)],
            )
            _run_and_message_insert(thread=thread, run=run, draft=draft, thread_write=thread_write)
        else:
            run.save(force_insert=True)
            messages_append(thread=thread, run=run, drafts=[draft.user_message(run_id=run.run_id)])
        interrupts_close(answers=answers, run=run)
        _enqueue_on_commit(run)
        return run


# The strategies that cancel the run holding the thread's turn.
_CANCELLING = (MultitaskStrategy.INTERRUPT, MultitaskStrategy.ROLLBACK)


def _multitask_strategy(multitask: str | None, turn: TurnRule | None) -> MultitaskStrategy:
    """The strategy a new run goes by: the request's, else ``MULTITASK_DEFAULT``, else the
    entry point's (``reject`` where its rule of turns wants an idle thread: today's)."""
    chosen = multitask or settings.MULTITASK_DEFAULT
    if not chosen:
        idle = turn is not None and turn.idle
        return MultitaskStrategy.REJECT if idle else MultitaskStrategy.ENQUEUE
    if chosen not in MultitaskStrategy.values:
        raise MultitaskInvalid("multitask")
    return MultitaskStrategy(chosen)


def _turn_rule(turn: TurnRule | None, strategy: MultitaskStrategy) -> TurnRule | None:
    """The rule of turns a new user message meets: its entry point's, with ``idle`` as the
    strategy says (only ``reject`` refuses a busy thread)."""
    idle = strategy == MultitaskStrategy.REJECT
    if turn is None:
        return TurnRule() if idle else None
    return replace(turn, idle=idle)


def _thread_interrupt(*, thread: Thread, rollback: bool, waited: set[int]) -> None:
    """Cancel the run holding the thread's turn (running or parked) and the runs that came
    to interrupt it and have not started (of two interrupts at once, the later wins), as
    ``run_cancel`` does, in the caller's transaction under the thread's row lock
    (``runs_cancel_in_turn``): their journals end before the new run exists, their jobs
    are stopped once it commits. The runs queued behind them
    stay queued. ``rollback``: those runs, and the runs that ``waited`` on the interrupts
    just withdrawn, leave the conversation (``Run.rolled_back``)."""
    holding = Q(status__in=(Run.Status.RUNNING, Run.Status.PAUSED)) | Q(
        status=Run.Status.QUEUED, jumps_queue=True
    )
    victims = list(Run.objects.filter(holding, thread=thread).order_by("-jumps_queue", "pk"))
    if rollback:
        Run.objects.filter(pk__in={*waited, *(run.pk for run in victims)}).update(rolled_back=True)
    runs_cancel_in_turn(runs=victims)


def _enqueue_on_commit(run: Run) -> None:
    if run.status == Run.Status.QUEUED:
        transaction.on_commit(partial(run_enqueue, run=run))


def _run_and_message_insert(
    *, thread: Thread, run: Run, draft: _RunDraft, thread_write: tuple[str, list[Any]]
) -> bool:
    """After ``thread_write`` (a statement on the thread's row that adds one to its
    ``last_seq``), the run and its user message with that ``seq``, in one statement; the
    run and message are stored only when the thread's row was written. PostgreSQL only."""
    thread_sql, thread_params = thread_write
    run_columns, run_values, run_params = _insert_parts(run)
    message = draft.user_message(run_id=run.run_id).message(thread=thread, run=None, seq=0)
    message_columns, message_values, message_params = _insert_parts(message, skip=("run_id", "seq"))
    seq = _column(Thread, "last_seq")
    sql = (
        f"WITH turn_thread AS ({thread_sql} RETURNING {seq}), "
        f"new_run AS (INSERT INTO {_table(Run)} ({run_columns}) SELECT {run_values} "
        f"FROM turn_thread RETURNING {_column(Run, 'id')}), "
        f"new_message AS (INSERT INTO {_table(Message)} ({_column(Message, 'run_id')}, "
        f"{_column(Message, 'seq')}, {message_columns}) SELECT new_run.{_column(Run, 'id')}, "
        f"turn_thread.{seq}, {message_values} FROM new_run, turn_thread) "
        f"SELECT new_run.{_column(Run, 'id')}, turn_thread.{seq} FROM new_run, turn_thread"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*thread_params, *run_params, *message_params])
        row = cursor.fetchone()
    if row is None:
        return False
    run.pk, thread.last_seq = row
    run._state.adding = False
    run._state.db = connection.alias
    return True


def _insert_parts(obj: Model, skip: tuple[str, ...] = ()) -> tuple[str, str, list[Any]]:
    """The columns, placeholders and values of ``obj`` as a new row, as Django's ``save``
    would write them (``auto_now`` fields set; a database-generated key left out)."""
    fields, columns, placeholders = _insert_plan(type(obj), skip)
    return (
        columns,
        placeholders,
        [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields],
    )


@cache
def _insert_plan(model: type[Model], skip: tuple[str, ...]) -> tuple[list[Field], str, str]:
    """The fields of a new row of ``model`` and their columns and placeholders. Each
    placeholder is cast to its column's type without a length (a value too long is still an
    error, not cut short), so the values of an ``INSERT … SELECT`` and a ``NULL`` are typed."""
    fields = [
        field
        for field in model._meta.concrete_fields
        if field.attname not in skip and not (field.primary_key and field.db_returning)
    ]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(cast(str, field.column)) for field in fields)
    placeholders = ", ".join(
        f"%s::{_base_type(field.db_type(connection) or 'text')}" for field in fields
    )
    return fields, columns, placeholders


def _base_type(db_type: str) -> str:
    return db_type.split("(", 1)[0]


def _table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _column(model: type[Model], name: str) -> str:
    return connection.ops.quote_name(cast(str, cast(Field, model._meta.get_field(name)).column))


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
    *,
    thread: Thread,
    new_message_id: str | None,
    earlier_message_ids: Sequence[str],
    tool_message_ids: Sequence[str] = (),
) -> set[str]:
    """The run's user message is new to the thread, and the messages the client says came
    before it (none, unless it holds the conversation) are the thread's. A user message is
    always stored, so without earlier messages to find the stored ones suffice (the events,
    a long thread's many rows, are looked through for a client's conversation only)."""
    new = {new_message_id} if new_message_id is not None else set()
    known = thread_message_ids_known(
        thread_id=thread.pk,
        ids={*new, *earlier_message_ids, *tool_message_ids},
        streamed=bool(earlier_message_ids or tool_message_ids),
    )
    if new_message_id in known:
        raise ConversationMessageRepeated(new_message_id)
    for message_id in earlier_message_ids:
        if message_id not in known:
            raise ConversationMessageUnknown(message_id)
    return set(tool_message_ids) - known


def _binary_blocks_resolve(*, user: AbstractBaseUser, snapshot: dict[str, Any]) -> list[Attachment]:
    """Turn each image's signed URL in the snapshot's user message into its storage place
    (``bucket``, ``path``, the sniffed ``mimeType``), and give the attachments, in order
    (docs/spec/run-agent-input.md, Compatibility Notes). A URL that is not a valid, unexpired
    signed URL of an object of the caller's is an ``AttachmentUrlInvalid`` (422), before
    anything is stored."""
    messages = snapshot["messages"]
    content = messages[0].get("content") if messages and messages[0]["role"] == "user" else None
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


def _is_retry(*, user: AbstractBaseUser, run_input: RunAgentInput) -> bool:
    """Whether the caller's thread has this run already (a retry answers it, whatever the
    limits say now)."""
    return Run.objects.filter(
        thread_id=run_input.thread_id, thread__owner_id=user.pk, run_id=run_input.run_id
    ).exists()


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


def _automation_job_check(*, user: AbstractBaseUser, run_input: RunAgentInput) -> str:
    """The automation job an ``automation`` run names (the user's own, or a shared one); one
    that does not exist is a 422."""
    name = run_input.automation_job
    if automation_job_get(name=name, owner_id=user.pk) is None:
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
