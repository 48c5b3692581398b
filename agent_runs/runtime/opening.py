"""A run's opening on the worker: its claim, what its stages share, its first step and the
events that say so, in one transaction (``run_claim_and_open``); where a parked run goes on
(``Checkpoint``).

Only the worker imports this module (it imports AgentScope through the stages).
"""

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from ag_ui.core import BaseEvent, CustomEvent, RunStartedEvent
from django.db import InterfaceError, OperationalError, connection, transaction
from pydantic import BaseModel

from agent_runs.agent_config import stage_enabled
from agent_runs.events.codec import RUN_RESUMED_EVENT
from agent_runs.events.emitter import RunEventEmitter
from agent_runs.models import Run, Stage
from agent_runs.runtime.output import AgentOutput, RouteDecision
from agent_runs.runtime.turn import RunTurn
from agent_runs.services.run_claim import run_claim_and_load
from agent_runs.services.steps import StepBegin, thread_lock_for_job

logger = logging.getLogger(__name__)


def run_claim_and_open(
    run_pk: int, loop: asyncio.AbstractEventLoop
) -> tuple[Run, RunEventEmitter, "Opening | Exception"] | None:
    """In one transaction, on one trip to a database thread: claim the run and load it
    with its emitter; read what its stages share, start its first stage's step and write
    its ``RUN_STARTED`` (or ``run_resumed``) and that ``STEP_STARTED`` (``run_open``). When the
    opening fails, all of it is rolled back and the run is claimed alone, in a transaction
    of its own: the failure is the job's to fail the run with (a savepoint between the claim
    and the opening was two round trips more for every run). ``None`` when the run is not
    this job's to run."""
    claimed = False
    try:
        with transaction.atomic():
            taken = _claim(run_pk, loop)
            if taken is None:
                return None
            claimed = True
            run, emitter = taken
            return run, emitter, run_open(run, emitter)
    except (InterfaceError, OperationalError):
        raise  # the connection failed: the caller tries the whole again on a new one
    except Exception as exc:
        if not claimed:
            raise
        opening = exc  # the job fails its run with it (``_run_pipeline``)
    with transaction.atomic():
        taken = _claim(run_pk, loop)
    if taken is None:
        return None
    run, emitter = taken
    return run, emitter, opening


def _claim(run_pk: int, loop: asyncio.AbstractEventLoop) -> tuple[Run, RunEventEmitter] | None:
    """The run claimed (in the caller's transaction, its thread locked first) and its job's
    emitter; ``None`` when it is not this job's to run."""
    thread_lock_for_job(run_pk=run_pk)
    claimed = run_claim_and_load(run_pk=run_pk)
    if claimed is None:
        return None
    run, last_event_id = claimed
    return run, job_emitter(run, last_event_id, loop)


def job_emitter(run: Run, last_event_id: int, loop: asyncio.AbstractEventLoop) -> RunEventEmitter:
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


def run_open(run: Run, emitter: RunEventEmitter) -> Opening:
    """The turn's reads, the step of the stage the run starts (or goes on) with, and the
    events that say so, written here."""
    turn, stages = run_turn(run, emitter)
    checkpoint = Checkpoint.model_validate(run.checkpoint or {})
    if turn.held is not None and checkpoint.next == Stage.ROUTER:
        # It goes on with the reply its interrupts held, as the router decided for it.
        checkpoint.next = Stage.WORKER
        checkpoint.decision = RouteDecision.model_validate(turn.held.decision)
    # Where a parked run goes on (past the end: its memory stage was turned off meanwhile).
    first = stages.index(checkpoint.next) if checkpoint.next in stages else len(stages)
    events = announcement(run, emitter)
    if first < len(stages):
        stage = stages[first]
        if stage == Stage.MEMORY:
            assert checkpoint.output is not None, "the worker answers before the memory"
            step_input: Any = checkpoint.output.answer
        else:
            step_input = turn.user_message.content
        begin = StepBegin(stage=stage, input=step_input)
        if connection.vendor == "postgresql":
            # The step and every event of the opening in one statement.
            turn.step_begin_journaled(begin, events_before=events)
            events = []
        else:
            events.append(turn.step_begin(begin))
    if events:
        emitter.emit_here(events)
    return Opening(turn=turn, stages=stages, checkpoint=checkpoint, first=first)


def announcement(run: Run, emitter: RunEventEmitter) -> list[BaseEvent]:
    """What the job's first events say: the run started, or a parked run goes on."""
    if not emitter.started:
        return [RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id)]
    if run.checkpoint is not None:
        resumed = Checkpoint.model_validate(run.checkpoint).next
        return [CustomEvent(name=RUN_RESUMED_EVENT, value={"next_stage": resumed})]
    return []


def run_turn(run: Run, emitter: RunEventEmitter) -> tuple[RunTurn, list[Stage]]:
    """What the stages share, and the stages (on a database thread)."""
    turn = RunTurn.prepare(run=run, emitter=emitter)
    turn.stages = pipeline_stages(run)
    return turn, turn.stages


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
