"""Executing a run on the worker: claim it once, answer, store, finish; then pass the turn on.

Only the worker imports this module (it imports AgentScope through the stages).
"""

import asyncio
import logging
import traceback
import uuid
from concurrent.futures import Future
from functools import partial

from ag_ui.core import CustomEvent, RunFinishedEvent
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from rq.timeouts import JobTimeoutException

from agent_runs import metrics
from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.codec import RUN_PAUSED_EVENT, RUN_RESUMED_EVENT
from agent_runs.events.emitter import RunEventEmitter
from agent_runs.log_context import run_log_context
from agent_runs.models import RUN_ENDED_STATUSES, Run, Stage
from agent_runs.runtime import tracing
from agent_runs.runtime.host import (
    Claim,
    Ending,
    RunHost,
    claim_register,
    current_job,
    db,
    db_retried,
    with_reconnect,
)
from agent_runs.runtime.openai_compatible import ProviderError
from agent_runs.runtime.opening import Checkpoint, Opening, announcement, run_claim_and_open
from agent_runs.runtime.stages import RunTurn, memory_stage, router_stage, worker_stage
from agent_runs.selectors.runs import run_status
from agent_runs.services.lifecycle import (
    RUN_ERROR_MESSAGE,
    run_complete,
    run_dispatch_next,
    run_fail,
    run_park,
)
from agent_runs.usage import BudgetExceeded

logger = logging.getLogger(__name__)

# A claimed run with its job's emitter and how it opened; ``None``: not this job's to run.
Started = tuple[Run, RunEventEmitter, Opening | Exception] | None


async def run_execute(*, run_pk: int, starting: "Future[Started] | None" = None) -> None:
    """Run the pipeline (router → worker → memory) for a queued run, streaming its AG-UI
    events, and store its answer and every model call's usage.

    The run always ends ``completed`` (``RUN_FINISHED``) or ``failed`` (``RUN_ERROR``), and
    the thread's turn is passed on after it. The claim comes first and is the only check: a
    run that is not this job's to run costs one UPDATE. A connection the database cut is
    replaced, so the job itself ends its run rather than leaving it to the sweeper.
    ``starting``: the claim begun already (``run_start_soon``).
    """
    if starting is None:
        started = await db(_run_start, run_pk, asyncio.get_running_loop())
    else:
        started = await asyncio.wrap_future(starting)
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


def run_start_soon(run_pk: int, host: RunHost) -> "Future[Started]":
    """The run's claim and opening (``_run_start``) begun at once on one of the host's
    database threads, from the thread that took its job (RQ's loop), for its task to await
    (``run_execute(starting=...)``): the claim does not wait for the loop to start the task
    and hand the claim to a thread (about a millisecond of the run's first token)."""
    return host.db_submit(_run_start, run_pk, host.loop)


def _run_start(run_pk: int, loop: asyncio.AbstractEventLoop) -> Started:
    """Claim the run and open it (``run_claim_and_open``), tried again on a new connection
    when the database cut the one it used (a restart, a failover while the worker waited):
    nothing of it commits unless all of it does."""
    return with_reconnect(partial(run_claim_and_open, run_pk, loop))


async def _run_job(run: Run, emitter: RunEventEmitter, opening: Opening | Exception) -> str | None:
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
        await _usage_settle(opening)
        await _run_fail(run, emitter, token=token, code=code, error=error)
        raise
    except Exception as exc:
        logger.exception("run %s failed", run.pk)
        code = error_code(exc)
        await _usage_settle(opening)  # before its RUN_ERROR, which reports it
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
        await _usage_settle(opening)
        if not (isinstance(opening, Opening) and opening.turn.passed_on):
            await db_retried(run_dispatch_next, thread_id=run.thread_id)


async def _usage_settle(opening: Opening | Exception) -> None:
    """Record the usage of the job's model calls that no write of it recorded."""
    if isinstance(opening, Opening):
        await opening.turn.usage.settle()


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


async def _run_pipeline(run: Run, emitter: RunEventEmitter, opening: Opening | Exception) -> bool:
    """The run's stages, then its end: ``True`` when it completed, ``False`` when it was
    parked (``RunNoLongerRunning`` when it was ended meanwhile)."""
    if isinstance(opening, Exception):
        for event in announcement(run, emitter):
            emitter.emit(event)
        raise opening
    turn, stages, checkpoint = opening.turn, opening.stages, opening.checkpoint
    for index, stage in enumerate(stages):
        if index < opening.first:
            continue  # done before the run was parked
        checkpoint.next = stage
        is_last = index == len(stages) - 1
        if turn.boundary is not None:
            if not await _stage_ahead(turn, checkpoint, stage, done=index, is_last=is_last):
                return False
        else:
            if await _park_if_asked(turn, checkpoint, done=index):
                return False
            with tracing.stage_span(stage):
                await _stage_run(turn, checkpoint, stage, is_last=is_last)
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


async def _stage_ahead(
    turn: RunTurn, checkpoint: Checkpoint, stage: Stage, *, done: int, is_last: bool
) -> bool:
    """Run a stage begun while the boundary before it is written (``RunTurn.boundary``):
    its model call does not wait for that statement, its events do (the emitter holds
    them until the boundary's are written). When the boundary parks the run instead (a
    pause asked for meanwhile), the stage is stopped and what it emitted dropped, and the
    run is parked as at any boundary: ``False``. When the boundary fails, the stage is
    stopped and the failure raised."""
    boundary = turn.boundary
    assert boundary is not None, "a boundary in flight"
    with tracing.stage_span(stage):
        running = asyncio.ensure_future(_stage_run(turn, checkpoint, stage, is_last=is_last))
        try:
            begun = await asyncio.shield(boundary)
        except BaseException:
            running.cancel()
            await asyncio.gather(running, boundary, return_exceptions=True)
            turn.boundary_settled(stage, failed=True)
            raise
        if not begun:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        if turn.boundary_settled(stage):
            await running
            return True
    if await _park_if_asked(turn, checkpoint, done=done):
        return False
    with tracing.stage_span(stage):  # resumed before it was parked
        await _stage_run(turn, checkpoint, stage, is_last=is_last)
    return True


def _run_finish(run: Run, turn: RunTurn) -> None:
    """The run completed: its last model calls' usage recorded (before its terminal event:
    the usage a run's end reports is what was recorded by then; each record on its own,
    ``RunUsage.store_kept``), then its last stage's step ended, its ``RUN_FINISHED`` written
    and the run marked completed, in one transaction. Then, on the same trip to a database
    thread, the thread's turn passes on (``run_dispatch_next``; what fails of it, the job's
    end tries again): under load a trip waits for a thread, and the job holds its slot in
    the worker until it ends."""
    turn.usage.store_kept()
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # One statement, where the lock, the step, the events and the run took a round
            # trip each (the transaction is the status receivers', ``run_status_transaction``).
            with turn.emitter.rewound_on_failure():
                turn.run_end_journaled()
        else:
            turn.step_closing()
            turn.emitter.emit(RunFinishedEvent(thread_id=str(run.thread_id), run_id=run.run_id))
            if not run_complete(run=run, claim_token=turn.claim_token):
                raise RunNoLongerRunning(run.pk)
    try:
        run_dispatch_next(thread_id=run.thread_id)
    except DatabaseError:
        logger.warning("run %s: passing its thread's turn on failed", run.pk, exc_info=True)
    else:
        turn.passed_on = True


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
