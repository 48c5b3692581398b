"""A run's life after it is created: claimed by one job, ended once (completed, failed or
cancelled) with exactly one terminal event, and its thread's next run started.

The thread's journal is a concatenation of whole runs, never interleaved: a run's events are
written only while it holds its thread's turn (from its claim to its terminal event), and a
run cancelled while queued gets its ``RUN_STARTED`` and ``RUN_ERROR`` when its turn comes,
after the run before it has ended. A job writes only under its claim (``Run.claim_token``,
checked in the same statement as each write), so a job that lost its run writes nothing.
The claim is services/run_claim.py's; the thread's line, services/thread_line.py's.
"""

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from ag_ui.core import RunErrorEvent, RunStartedEvent
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from agent_runs.errors import RunNotPaused
from agent_runs.events.emitter import RunEventEmitter
from agent_runs.events.store import HeldEvents
from agent_runs.models import RUN_ACTIVE_STATUSES, Run, Step, Thread
from agent_runs.selectors.runs import runs_next_queued_of_idle_threads
from agent_runs.services.queue import job_stop, run_enqueue_if_idle, runs_enqueue_if_idle
from agent_runs.services.run_request import STEP_BUDGET_KEY, run_step_budget
from agent_runs.services.steps import JOURNALED_IDS, StepEnd, step_end_journaled_ctes
from agent_runs.services.thread_line import ENDED_UNSTARTED, line_head
from agent_runs.signals import run_status_changed_send, run_status_transaction

logger = logging.getLogger(__name__)

RUN_CANCELLED_CODE = "cancelled"
RUN_CANCELLED_MESSAGE = "run cancelled"
# docs/spec/sse-events-and-usage.md, RUN_ERROR: what clients see; the cause stays in Run.error.
RUN_ERROR_MESSAGE = "runtime execution failed"
_MAX_ERROR_CHARS = 10_000


def run_complete(*, run: Run, claim_token: uuid.UUID) -> bool:
    """Mark the job's run completed, and its thread active (``_thread_active``); ``False``
    when it is no longer the job's to end. The job calls it in its transaction that holds
    the thread's lock: on PostgreSQL the two are one statement."""
    now = timezone.now()
    with run_status_transaction():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(_COMPLETE, _complete_params(run, claim_token, now))
                row = cursor.fetchone()
            completed = row is not None and row[0] == 1
        else:
            completed = (
                Run.objects.filter(
                    pk=run.pk, claim_token=claim_token, status=Run.Status.RUNNING
                ).update(status=Run.Status.COMPLETED, finished_at=now)
                == 1
            )
            if completed:
                _thread_active(thread_id=run.thread_id, at=now)
        if completed:
            run.status, run.finished_at = Run.Status.COMPLETED, now
            run_status_changed_send(run_pk=run.pk, status=Run.Status.COMPLETED, run=run)
    return completed


def run_complete_journaled(
    *, run: Run, claim_token: uuid.UUID, closing: StepEnd | None, events: HeldEvents
) -> list[int] | None:
    """``run_complete`` with the thread's lock (``thread_lock_for_job``), the last stage's
    step end (``closing``) and the run's last events (``events``, its terminal event last)
    in one statement (PostgreSQL), in the caller's transaction, where they took a round
    trip each: the ids of the events written, or ``None`` when the run is no longer the
    job's to end (nothing is changed)."""
    now = timezone.now()
    ctes, params = step_end_journaled_ctes(
        run=run, ended=closing, events=events, condition="EXISTS (SELECT 1 FROM done)"
    )
    sql = (
        f"WITH locked AS (SELECT 1 FROM {Thread._meta.db_table} WHERE id = %s "
        f"FOR NO KEY UPDATE), {_COMPLETE_CTES.format(locked=' AND EXISTS (SELECT 1 FROM locked)')}"
        f", {ctes} SELECT (SELECT count(*) FROM done), {JOURNALED_IDS}"
    )
    with run_status_transaction():
        with connection.cursor() as cursor:
            cursor.execute(sql, [run.thread_id, *_complete_params(run, claim_token, now), *params])
            row = cursor.fetchone()
        if row[0] != 1:
            return None
        run.status, run.finished_at = Run.Status.COMPLETED, now
        run_status_changed_send(run_pk=run.pk, status=Run.Status.COMPLETED, run=run)
    return list(row[1])


def _complete_params(run: Run, claim_token: uuid.UUID, now: datetime) -> list[Any]:
    return [
        *(Run.Status.COMPLETED.value, now, run.pk, claim_token),
        *(Run.Status.RUNNING.value, now, now),
    ]


# ``run_complete`` on PostgreSQL: the run completed under the job's claim (``locked``: a
# condition it waits for first), and its thread's latest activity moved to then
# (``_thread_active``), in one statement.
_COMPLETE_CTES = (
    f"done AS (UPDATE {Run._meta.db_table} SET status = %s, finished_at = %s "
    "WHERE id = %s AND claim_token = %s AND status = %s{locked} RETURNING thread_id), "
    f"touched AS (UPDATE {Thread._meta.db_table} AS t SET updated_at = %s FROM done "
    "WHERE t.id = done.thread_id AND t.updated_at < %s RETURNING t.id)"
)
_COMPLETE = (
    f"WITH {_COMPLETE_CTES.format(locked='')} "
    "SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM touched)"
)


def run_fail(
    *,
    run_pk: int,
    error: str,
    code: str = "internal_error",
    claim_token: uuid.UUID | None = None,
    stop_job: bool = False,
    message: str = RUN_ERROR_MESSAGE,
) -> bool:
    """Fail a running run (only the claiming job's, when ``claim_token`` is given), keeping
    the error for staff, and end its journal with ``RUN_ERROR`` (the public ``message`` says
    nothing of the cause, unless it is the caller's to act on: a budget reached).
    ``stop_job``: the job may still run somewhere (the sweeper found it silent): stop it. A
    queued run is left for its job or the recovery to run."""
    with transaction.atomic():
        failed = _fail_mark(run_pk=run_pk, error=error, claim_token=claim_token)
    if failed is None:
        return False  # it ended otherwise (whoever ended it ended its journal), or not ours
    run, now = failed
    _thread_active(thread_id=run.thread_id, at=now)
    if stop_job:
        job_stop(job_id=str(run.task_id), wait=False)
    _run_journal_end(run, code=code, message=message)
    return True


def _fail_mark(
    *, run_pk: int, error: str, claim_token: uuid.UUID | None
) -> tuple[Run, datetime] | None:
    """Mark the run failed under its row lock, if it is running (and the job's, when
    ``claim_token`` is given): the run and when it ended."""
    run = Run.objects.select_for_update().filter(pk=run_pk).first()
    if run is None or run.status != Run.Status.RUNNING:
        return None
    if claim_token is not None and run.claim_token != claim_token:
        return None
    now = timezone.now()
    Run.objects.filter(pk=run_pk).update(
        status=Run.Status.FAILED, error=error[-_MAX_ERROR_CHARS:], finished_at=now
    )
    _running_steps_fail(run_pk=run_pk, at=now)
    run_status_changed_send(run_pk=run_pk, status=Run.Status.FAILED)
    return run, now


def run_cancel(*, run: Run) -> Run:
    """Cancel a run: a queued run never starts; a running run's job is stopped (its model
    call in flight cancelled), its running step failed, and the run's journal ended with
    ``RUN_ERROR`` ``code: "cancelled"``, told apart from a failure by its code. A parked run
    that had started is ended the same way (no job holds it). A queued run's journal gets
    the same two events when its turn comes. A run that has ended is left as it is, so
    cancelling twice is harmless."""
    now = timezone.now()
    with transaction.atomic():
        was_running, journal_started, was_active = _cancel_mark(run=run, at=now)
    if was_active:
        _thread_active(thread_id=run.thread_id, at=now)
    if was_running:
        job_stop(job_id=str(run.task_id))
    if was_active and (was_running or journal_started):
        _run_journal_end(run, code=RUN_CANCELLED_CODE, message=RUN_CANCELLED_MESSAGE)
    run_dispatch_next(thread_id=run.thread_id)
    run.refresh_from_db()
    return run


def runs_cancel_in_turn(*, runs: Sequence[Run]) -> None:
    """Cancel ``runs`` of one thread as ``run_cancel`` does, in the caller's transaction,
    which holds the thread's row lock (a multitask ``interrupt``: the new run is stored in
    the same transaction, and enqueued when it commits). Each run's journal is ended in it
    too, whether it had started or not (its turn has come: nothing of the thread runs once
    these have ended), the started ones first: the run's row, locked here to the end,
    fences its job's writes (they wait, then find it cancelled), so nothing of the job
    follows its ``RUN_ERROR``. Once it commits, their jobs are stopped."""
    now = timezone.now()
    for run in sorted(runs, key=lambda run: (run.started_at is None, not run.jumps_queue, run.pk)):
        was_running, _, was_active = _cancel_mark(run=run, at=now)
        if was_active:
            _run_journal_end(run, code=RUN_CANCELLED_CODE, message=RUN_CANCELLED_MESSAGE)
        if was_running:
            transaction.on_commit(partial(job_stop, job_id=str(run.task_id)))
    if runs:
        _thread_active(thread_id=runs[0].thread_id, at=now)


def _cancel_mark(*, run: Run, at: datetime) -> tuple[bool, bool, bool]:
    """Mark the run cancelled under its row lock, if it is active; whether it was running,
    whether its journal had started, whether it was active."""
    locked = Run.objects.select_for_update().get(pk=run.pk)
    was_running = locked.status == Run.Status.RUNNING
    journal_started = locked.started_at is not None
    was_active = locked.status in RUN_ACTIVE_STATUSES
    if was_active:
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.CANCELLED, finished_at=at, pause_requested=False
        )
        _running_steps_fail(run_pk=run.pk, at=at)
        run_status_changed_send(run_pk=run.pk, status=Run.Status.CANCELLED)
    return was_running, journal_started, was_active


def _running_steps_fail(*, run_pk: int, at: datetime) -> None:
    """The run ended while a stage of it ran: that stage's step failed."""
    Step.objects.filter(run_id=run_pk, status=Step.Status.RUNNING).update(
        status=Step.Status.FAILED, completed_at=at
    )


def run_pause(*, run: Run) -> Run:
    """Pause a run: a queued run is parked at once (it never starts until resumed); a
    running run's job is asked to park it at the next stage boundary (never in the middle
    of a model call), where it saves its progress and ends, holding no worker. A parked or
    ended run is left as it is. Returns the run as it now is."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status == Run.Status.QUEUED:
            Run.objects.filter(pk=run.pk).update(status=Run.Status.PAUSED)
            run_status_changed_send(run_pk=run.pk, status=Run.Status.PAUSED)
        elif locked.status == Run.Status.RUNNING:
            Run.objects.filter(pk=run.pk).update(pause_requested=True)
    run.refresh_from_db()
    return run


def run_resume(*, run: Run, steps: int | None = None) -> Run:
    """Go on with a paused run: a parked run is queued again (its job goes on from the next
    stage; nothing finished runs twice), and a pause its job has not reached yet is called
    off; any other run is ``RunNotPaused`` (409). ``steps``: a run being stepped through
    (a step budget in ``Run.request``) may run this many more stages, whatever its state, then parks
    again."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        changes = _resume_changes(locked, steps=steps)
        queued = changes.get("status") == Run.Status.QUEUED
        Run.objects.filter(pk=run.pk).update(**changes)
        if queued:
            run_status_changed_send(run_pk=run.pk, status=Run.Status.QUEUED)
    if queued:
        run_dispatch_next(thread_id=run.thread_id)
    run.refresh_from_db()
    return run


def _resume_changes(locked: Run, *, steps: int | None) -> dict[str, Any]:
    """What resuming the run (read under its row lock) changes; ``RunNotPaused`` when it
    is neither paused, nor being paused, nor stepped through."""
    changes: dict[str, Any] = {"pause_requested": False}
    budget = run_step_budget(locked)
    if steps is not None and budget is not None and locked.status in RUN_ACTIVE_STATUSES:
        changes["request"] = {**locked.request, STEP_BUDGET_KEY: budget + steps}
    elif not (
        locked.status == Run.Status.PAUSED
        or (locked.status == Run.Status.RUNNING and locked.pause_requested)
    ):
        raise RunNotPaused()
    if locked.status == Run.Status.PAUSED:
        changes["status"] = Run.Status.QUEUED
    if locked.status == Run.Status.PAUSED or locked.pause_requested:
        changes["resumed_at"] = timezone.now()
    return changes


def run_park(*, run: Run, claim_token: uuid.UUID, checkpoint: dict[str, Any], done: int) -> bool:
    """The job parks its run at a stage boundary, ``done`` stages run: the run is ``paused``
    with its progress, and no longer the job's, if a pause is still asked for or its step
    budget is still spent (a resume may have come since the job looked). ``False`` when it
    is not parked: the job goes on, or stops if the run is no longer its own."""
    asked = Q(pause_requested=True) | Q(**{f"request__{STEP_BUDGET_KEY}__lte": done})
    with run_status_transaction():
        parked = (
            Run.objects.filter(
                asked, pk=run.pk, claim_token=claim_token, status=Run.Status.RUNNING
            ).update(
                status=Run.Status.PAUSED,
                checkpoint=checkpoint,
                claim_token=None,
                pause_requested=False,
                heartbeat_at=None,
            )
            == 1
        )
        if parked:
            run_status_changed_send(run_pk=run.pk, status=Run.Status.PAUSED)
    return parked


def _thread_active(*, thread_id: uuid.UUID, at: datetime) -> None:
    """A run of the thread ended: that is the thread's latest activity (``updated_at``, by
    which its owner's threads are listed), as each message stored is. Outside the run's row
    lock where the caller can (cancel, fail): a stage storing its messages locks the thread
    and the run in one statement, and the two orders would deadlock."""
    Thread.objects.filter(pk=thread_id, updated_at__lt=at).update(updated_at=at)


def _run_journal_end(run: Run, *, code: str, message: str) -> None:
    """End the journal of a run that was ended outside its job: ``RUN_STARTED`` if it has
    none yet, then ``RUN_ERROR`` unless it has its terminal event already."""
    emitter = RunEventEmitter(run=run, resume=True)
    ids = {"threadId": str(run.thread_id), "runId": run.run_id}
    if not emitter.started:
        emitter.emit(RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id))
    if not emitter.ended:
        emitter.emit(RunErrorEvent(message=message, code=code, **ids))


def run_dispatch_next(*, thread_id: uuid.UUID) -> bool:
    """The thread's turn passes on: runs cancelled while queued whose turn it is get their
    journal, and the next queued run's job is enqueued (it may have found it not its turn).
    One query when nothing waits. Returns whether a job was enqueued."""
    head = line_head(thread_id=thread_id)
    if head is not None and head.status == Run.Status.CANCELLED:
        _ended_unstarted_journals_write(thread_id=thread_id)
        head = line_head(thread_id=thread_id)
    return head is not None and head.status == Run.Status.QUEUED and run_enqueue_if_idle(run=head)


def _ended_unstarted_journals_write(*, thread_id: uuid.UUID) -> None:
    """Write ``RUN_STARTED`` + ``RUN_ERROR cancelled`` for each run at the head of the
    thread's line that was cancelled while queued, in order, under the thread's row lock (so
    two dispatchers write each once)."""
    while True:
        with transaction.atomic():
            if not Thread.objects.select_for_update().filter(pk=thread_id).exists():
                return
            head = line_head(thread_id=thread_id)
            if head is None or head.status in RUN_ACTIVE_STATUSES:
                return
            _run_journal_end(head, code=RUN_CANCELLED_CODE, message=RUN_CANCELLED_MESSAGE)


def runs_recover() -> tuple[int, int]:
    """Repair what a killed worker or a lost Redis left behind; PostgreSQL is the truth.

    A ``running`` run whose worker has not beaten its heartbeat (``Run.heartbeat_at``,
    renewed every ``AGENT_RUN_HEARTBEAT_SECONDS`` while its job runs) for
    ``AGENT_RUN_STALE_SECONDS``, or that has outlived the job timeout, is failed with
    ``RUN_ERROR`` (``worker_lost``) and its job, if it still runs somewhere, is stopped. Then
    every thread with nothing running gets its turn passed on: cancelled runs' journals
    written and its next queued run enqueued, unless that run's job is still waiting.
    Workers run this when they start and every ``AGENT_RUN_SWEEP_SECONDS``. Returns
    (failed, enqueued).
    """
    failed = _lost_runs_fail()
    waiting = (
        Run.objects.filter(ENDED_UNSTARTED)
        .exclude(thread__runs__status=Run.Status.RUNNING)
        .values_list("thread_id", flat=True)
        .distinct()
    )
    for thread_id in list(waiting):
        _ended_unstarted_journals_write(thread_id=thread_id)
    return failed, runs_enqueue_if_idle(runs=runs_next_queued_of_idle_threads())


def _lost_runs_fail() -> int:
    """Fail the running runs whose worker is silent or whose job overran (``worker_lost``),
    passing their threads' turns to runs cancelled while queued; how many were failed."""
    now = timezone.now()
    silent = now - timedelta(seconds=settings.AGENT_RUN_STALE_SECONDS)
    overdue = now - timedelta(seconds=settings.AGENT_RUN_JOB_TIMEOUT + 60)
    lost = Run.objects.filter(status=Run.Status.RUNNING).filter(
        Q(heartbeat_at__lt=silent)
        | Q(heartbeat_at=None, started_at__lt=silent)
        | Q(started_at__lt=overdue)
    )
    failed = 0
    for run_pk, thread_id in lost.values_list("pk", "thread_id"):
        error = "the worker running this run stopped"
        if run_fail(run_pk=run_pk, error=error, code="worker_lost", stop_job=True):
            failed += 1
            _ended_unstarted_journals_write(thread_id=thread_id)
    return failed
