"""Executing a run on the worker: claim it once, answer, store, finish; then pass the turn on.

Only the worker imports this module (it imports AgentScope through the stages).
"""

import asyncio
import logging
import traceback
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from ag_ui.core import BaseEvent, CustomEvent, RunFinishedEvent, RunStartedEvent
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import (
    DatabaseError,
    transaction,
)
from django.utils import timezone
from pydantic import BaseModel
from rq.timeouts import JobTimeoutException

from agent_runs import metrics
from agent_runs.agent_config import stage_enabled
from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.codec import RUN_PAUSED_EVENT, RUN_RESUMED_EVENT
from agent_runs.events.emitter import RunEventEmitter
from agent_runs.log_context import run_log_context
from agent_runs.models import RUN_ENDED_STATUSES, Run, Stage
from agent_runs.runtime import tracing
from agent_runs.runtime.chat_models import ModelCall
from agent_runs.runtime.demo_model import DEMO_MODEL_ID
from agent_runs.runtime.host import (
    Claim,
    Ending,
    claim_register,
    current_job,
    db,
    db_retried,
    with_reconnect,
)
from agent_runs.runtime.openai_compatible import ProviderError
from agent_runs.runtime.output import AgentOutput, RouteDecision
from agent_runs.runtime.stages import RunTurn, memory_stage, router_stage, worker_stage
from agent_runs.selectors.context import user_memory_notes
from agent_runs.selectors.runs import run_status
from agent_runs.services.lifecycle import (
    RUN_ERROR_MESSAGE,
    run_complete,
    run_dispatch_next,
    run_fail,
    run_park,
)
from agent_runs.services.run_claim import run_claim_and_load
from agent_runs.services.steps import StepBegin
from billing import services as billing_services
from billing.errors import BudgetExceeded

logger = logging.getLogger(__name__)

T = TypeVar("T")


async def run_execute(*, run_pk: int) -> None:
    """Run the pipeline (router → worker → memory) for a queued run, streaming its AG-UI
    events, and store its answer and every model call's usage.

    The run always ends ``completed`` (``RUN_FINISHED``) or ``failed`` (``RUN_ERROR``), and
    the thread's turn is passed on after it. The claim comes first and is the only check: a
    run that is not this job's to run costs one UPDATE. A connection the database cut is
    replaced, so the job itself ends its run rather than leaving it to the sweeper.
    """
    started = await db(_run_start, run_pk, asyncio.get_running_loop())
    if started is None:
        logger.info("run %s is not claimable now (taken, finished or waiting its turn)", run_pk)
        return
    run, emitter, opening = started
    assert emitter.claim_token is not None, "a job's emitter writes under its claim"
    claim_register(Claim(run_pk, emitter.claim_token))
    try:
        # Every log line from here to the end names the run (ops/logging.py).
        with (
            run_log_context(run_id=run.run_id, thread_id=str(run.thread_id)),
            tracing.run_span(run, job_id=_job_id()) as span,
        ):
            logger.info("run %s: claimed", run.pk)
            ended = await _run_job(run, emitter, opening)
            tracing.run_span_ended(span, ended)
            _run_measure(run, ended=ended)
    finally:
        claim_register(None)


def _job_id() -> str | None:
    held = current_job()
    return held.job_id if held is not None else None


def _run_start(
    run_pk: int, loop: asyncio.AbstractEventLoop
) -> tuple[Run, RunEventEmitter, "Opening | Exception"] | None:
    """Claim the run and open it (``_run_claim_and_open``), tried again on a new connection
    when the database cut the one it used (a restart, a failover while the worker waited):
    nothing of it commits unless all of it does."""
    return with_reconnect(partial(_run_claim_and_open, run_pk, loop))


def _run_claim_and_open(
    run_pk: int, loop: asyncio.AbstractEventLoop
) -> tuple[Run, RunEventEmitter, "Opening | Exception"] | None:
    """In one transaction, on one trip to a database thread: claim the run and load it
    with its emitter; read what its stages share, start its first stage's step and write
    its ``RUN_STARTED`` (or ``run_resumed``) and that ``STEP_STARTED`` (``_run_open``). What
    fails after the claim is rolled back to it and is the job's to fail the run with; the
    claim commits either way. ``None`` when the run is not this job's to run."""
    with transaction.atomic():
        claimed = run_claim_and_load(run_pk=run_pk)
        if claimed is None:
            return None
        run, last_event_id = claimed
        emitter = _emitter(run, last_event_id, loop)
        opening: Opening | Exception
        try:
            with transaction.atomic():
                opening = _run_open(run, emitter)
        except Exception as exc:  # the job fails its run with it (``_run_pipeline``)
            opening = exc
            emitter = _emitter(run, last_event_id, loop)  # one that wrote nothing
    return run, emitter, opening


def _emitter(run: Run, last_event_id: int, loop: asyncio.AbstractEventLoop) -> RunEventEmitter:
    """The job's emitter, its events written as they come by the loop's journal writer."""
    return RunEventEmitter(
        run=run,
        resume=run.checkpoint is not None,  # a parked run goes on with its journal
        previous_id=last_event_id,
        claim_token=run.claim_token,
        loop=loop,
    )


@dataclass
class Opening:
    """What a claimed run starts with: its turn, its stages, where it goes on from (a
    parked run: its checkpoint), and the first of its stages to run (its step begun)."""

    turn: RunTurn
    stages: list[Stage]
    checkpoint: "Checkpoint"
    first: int


def _run_open(run: Run, emitter: RunEventEmitter) -> Opening:
    """The turn's reads, the step of the stage the run starts (or goes on) with, and the
    events that say so, written here."""
    turn, stages = _run_turn(run, emitter)
    checkpoint = Checkpoint.model_validate(run.checkpoint or {})
    if turn.held is not None and checkpoint.next == Stage.ROUTER:
        # It goes on with the reply its interrupts held, as the router decided for it.
        checkpoint.next = Stage.WORKER
        checkpoint.decision = RouteDecision.model_validate(turn.held.decision)
    # Where a parked run goes on (past the end: its memory stage was turned off meanwhile).
    first = stages.index(checkpoint.next) if checkpoint.next in stages else len(stages)
    events = _announcement(run, emitter)
    if first < len(stages):
        stage = stages[first]
        if stage == Stage.MEMORY:
            assert checkpoint.output is not None, "the worker answers before the memory"
            step_input: Any = checkpoint.output.answer
        else:
            step_input = turn.user_message.content
        events.append(turn.step_begin(StepBegin(stage=stage, input=step_input)))
    if events:
        emitter.emit_here(events)
    return Opening(turn=turn, stages=stages, checkpoint=checkpoint, first=first)


def _announcement(run: Run, emitter: RunEventEmitter) -> list[BaseEvent]:
    """What the job's first events say: the run started, or a parked run goes on."""
    if not emitter.started:
        return [RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id)]
    if run.checkpoint is not None:
        resumed = Checkpoint.model_validate(run.checkpoint).next
        return [CustomEvent(name=RUN_RESUMED_EVENT, value={"next_stage": resumed})]
    return []


async def _run_job(
    run: Run, emitter: RunEventEmitter, opening: "Opening | Exception"
) -> str | None:
    """The claimed run's pipeline; the status it ended with under this job (``None`` when it
    was parked, or ended by someone else in a way this job cannot tell)."""
    token = emitter.claim_token
    assert token is not None, "a job's emitter writes under its claim"
    try:
        return Run.Status.COMPLETED if await _run_pipeline(run, emitter, opening) else None
    except RunNoLongerRunning:
        # Cancelled (or failed by the sweeper) while it ran: whoever ended the run ended its
        # journal; nothing more is this job's to write.
        logger.info("run %s ended while its job ran", run.pk)
        return await db_retried(run_status, run_pk=run.pk)
    except asyncio.CancelledError:
        held = current_job()
        ending = held.ending if held is not None else None
        if ending is None or ending == Ending.STOPPED:
            # Its run was cancelled (the cancel writes its end), or someone cancelled the
            # task itself: nothing is this job's to write.
            logger.info("run %s: its job was stopped", run.pk)
            raise
        code, error = _CANCEL_ENDINGS[ending]
        await _run_fail(run, emitter, token=token, code=code, error=error)
        raise
    except Exception as exc:
        logger.exception("run %s failed", run.pk)
        code = error_code(exc)
        return await _run_fail(
            run,
            emitter,
            token=token,
            code=code,
            error=traceback.format_exc(),
            message=_public_message(exc) if code == "budget_exceeded" else RUN_ERROR_MESSAGE,
        )
    finally:
        await emitter.settle_async()  # the job's writes are all made when it ends
        await db_retried(run_dispatch_next, thread_id=run.thread_id)


# The RUN_ERROR code and the error kept for staff of a run whose job was cancelled other
# than by the run's own cancel.
_CANCEL_ENDINGS = {
    Ending.TIMED_OUT: ("timeout", "JobTimeoutException: the job outlived its timeout"),
    Ending.SHUTDOWN: ("worker_lost", "the worker stopped (a cold stop) while the run ran"),
}


async def _run_fail(
    run: Run,
    emitter: RunEventEmitter,
    *,
    token: uuid.UUID,
    code: str,
    error: str,
    message: str = RUN_ERROR_MESSAGE,
) -> str | None:
    """End the job's run ``failed`` with ``RUN_ERROR`` ``code`` after what it emitted; the
    status it has now."""
    await emitter.settle_async()  # what was emitted before the failure comes before it
    failed = await db_retried(
        run_fail, run_pk=run.pk, error=error, code=code, claim_token=token, message=message
    )
    return Run.Status.FAILED if failed else await db_retried(run_status, run_pk=run.pk)


def _run_measure(run: Run, *, ended: str | None) -> None:
    """The run in this worker's metrics (docs/operations.md), from what the job loaded: its
    wait for its first claim (a parked run's resume is not a wait in the queue) and, when it
    ended, its status and its duration from its first start."""
    assert run.started_at is not None, "the claim sets started_at"
    if run.checkpoint is None:
        wait = (run.started_at - run.created_at).total_seconds()
        metrics.RUN_QUEUE_WAIT.observe(max(wait, 0.0))
    if ended in RUN_ENDED_STATUSES:
        seconds = max((timezone.now() - run.started_at).total_seconds(), 0.0)
        metrics.RUNS_FINISHED.labels(ended).inc()
        metrics.RUN_DURATION.labels(ended).observe(seconds)
        logger.info("run %s %s after %.2f s", run.pk, ended, seconds)


async def _run_pipeline(run: Run, emitter: RunEventEmitter, opening: "Opening | Exception") -> bool:
    """The run's stages, then its end: ``True`` when it completed, ``False`` when it was
    parked (``RunNoLongerRunning`` when it was ended meanwhile)."""
    if isinstance(opening, Exception):
        for event in _announcement(run, emitter):
            emitter.emit(event)
        raise opening
    turn, stages, checkpoint = opening.turn, opening.stages, opening.checkpoint
    for index, stage in enumerate(stages):
        if index < opening.first:
            continue  # done before the run was parked
        checkpoint.next = stage
        if await _park_if_asked(turn, checkpoint, done=index):
            return False
        with tracing.stage_span(stage):
            await _stage_run(turn, checkpoint, stage, is_last=index == len(stages) - 1)
        if stage == Stage.WORKER and checkpoint.output is None:
            break  # its reply waits on tool calls: the run ends here
    # Everything before the end is written first; the terminal event is written on the
    # database thread that marks the run completed, in one transaction with it (and with
    # the last stage's step end): a cancel that comes meanwhile finds the run completed, or
    # its own RUN_ERROR is the run's only terminal event.
    await emitter.flush_async()
    await db(_run_finish, run, turn)
    return True


async def _stage_run(
    turn: RunTurn, checkpoint: "Checkpoint", stage: Stage, *, is_last: bool
) -> None:
    """Run one stage; what it gives goes in the checkpoint."""
    if stage == Stage.ROUTER:
        checkpoint.decision = await router_stage(turn, is_last=is_last)
    elif stage == Stage.WORKER:
        assert checkpoint.decision is not None, "the router decides before the worker"
        checkpoint.output = await worker_stage(turn, checkpoint.decision, is_last=is_last)
    else:
        assert checkpoint.output is not None, "the worker answers before the memory"
        await memory_stage(turn, checkpoint.output)


def _run_turn(run: Run, emitter: RunEventEmitter) -> tuple[RunTurn, list[Stage]]:
    """What the stages share, and the stages (on a database thread)."""
    turn = RunTurn.prepare(
        run=run,
        emitter=emitter,
        memory_notes=user_memory_notes(
            user_id=run.thread.owner_id, limit=settings.AGENT_MEMORY_MAX_ITEMS
        ),
        store_usage=partial(_store_usage, run),
    )
    turn.stages = pipeline_stages(run)
    return turn, turn.stages


def _run_finish(run: Run, turn: RunTurn) -> None:
    """The run completed: its last stage's step ended, its ``RUN_FINISHED`` written and the
    run marked completed, in one transaction."""
    with transaction.atomic():
        turn.step_closing()
        turn.emitter.emit(RunFinishedEvent(thread_id=str(run.thread_id), run_id=run.run_id))
        if not run_complete(run=run, claim_token=turn.claim_token):
            raise RunNoLongerRunning(run.pk)


def pipeline_stages(run: Run) -> list[Stage]:
    """The stages the run goes through, in order (the memory stage where its agent has it)."""
    stages = [Stage.ROUTER, Stage.WORKER]
    try:
        if stage_enabled(run=run, stage=Stage.MEMORY):
            stages.append(Stage.MEMORY)
    except Exception:  # say, its automation job was deleted since the run was queued
        logger.exception("memory stage of run %s not started", run.pk)
    return stages


class Checkpoint(BaseModel):
    """A parked run's progress (``Run.checkpoint``): the stage it goes on with, and what the
    stages before it gave."""

    next: Stage = Stage.ROUTER
    decision: RouteDecision | None = None
    output: AgentOutput | None = None


async def _park_if_asked(turn: RunTurn, checkpoint: Checkpoint, *, done: int) -> bool:
    """At a stage boundary, ``done`` stages run: park the run when a pause was asked for, or
    its step budget is spent, as the run's row said when its last stage finished
    (``RunTurn.control``; a job that has finished none yet was just given its stage). Its
    journal says so (``CUSTOM run_paused``), then the run is ``paused`` with its checkpoint
    and the job ends; ``RunNoLongerRunning`` when it was cancelled meanwhile."""
    run = turn.run
    asked = turn.control
    if asked is None or not asked.parks_after(done):
        return False
    reason = "pause" if asked.pause_requested else "step"
    turn.emitter.emit(
        CustomEvent(name=RUN_PAUSED_EVENT, value={"reason": reason, "next_stage": checkpoint.next})
    )
    await turn.emitter.flush_async()
    checkpoint_json = checkpoint.model_dump(mode="json")
    parked = await db(
        run_park, run=run, claim_token=turn.claim_token, checkpoint=checkpoint_json, done=done
    )
    if not parked:
        # Resumed before it was parked (or cancelled: the next write of the job stops it).
        turn.emitter.emit(
            CustomEvent(name=RUN_RESUMED_EVENT, value={"next_stage": checkpoint.next})
        )
        return False
    logger.info("run %s parked before its %s stage (%s)", run.pk, checkpoint.next, reason)
    return True


def _store_usage(run: Run, stage: str, calls: list[ModelCall], trace_parent: Any = None) -> int:
    """Record model calls of a stage (a failed or cancelled run is billed for the calls it
    made too), each in its own short transaction; how many were. With tracing on, each call
    is a span under ``trace_parent`` (the stage's context), with its cost."""
    recorded = 0
    for call in calls:
        record = None
        if call.model_id != DEMO_MODEL_ID:  # the offline demo model is not billed
            try:
                record = billing_services.usage_record(
                    run=run,
                    stage=stage,
                    model_id=call.model_id,
                    usage=call.usage,
                    metadata=call.metadata,
                )
                recorded += 1
            except DatabaseError:
                # The answer matters more than its bookkeeping: keep the call for staff in
                # the log, and go on with the run.
                logger.exception("run %s: usage of a %s call not recorded: %s", run.pk, stage, call)
        if trace_parent is not None:
            tracing.model_call_span(
                call,
                parent=trace_parent,
                stage=stage,
                cost=None if record is None else record.cost,
                currency="" if record is None else record.currency,
                cost_source="" if record is None else record.cost_source,
            )
    return recorded


def _public_message(exc: BaseException) -> str:
    """The message of the budget error in the chain (the caller's to act on)."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, BudgetExceeded):
            return str(current)
        current = current.__cause__ or current.__context__
    return RUN_ERROR_MESSAGE


def error_code(exc: BaseException) -> str:
    """The stable ``RUN_ERROR.code`` for a failure; the details stay in ``Run.error``.

    The whole chain counts: a job timeout raised inside the model call reaches us wrapped."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    for kind, code in _ERROR_CODES:
        if any(isinstance(error, kind) for error in chain):
            return code
    return "internal_error"


_ERROR_CODES: tuple[tuple[type[BaseException], str], ...] = (
    (BudgetExceeded, "budget_exceeded"),
    (JobTimeoutException, "timeout"),
    (ProviderError, "model_error"),
    (ImproperlyConfigured, "configuration_error"),
    (DatabaseError, "database_error"),
)
