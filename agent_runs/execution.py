"""Executing a run on the worker: claim it once, answer, store, finish; then start the next.

Only the worker imports this module (it imports AgentScope through the pipeline).
"""

import logging
import traceback
from datetime import UTC, datetime, timedelta
from functools import partial

import openai
from ag_ui.core import RunErrorEvent, RunFinishedEvent, RunStartedEvent
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from redis.exceptions import RedisError
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.timeouts import JobTimeoutException

from agent_runs import selectors, services
from agent_runs.demo_model import DEMO_MODEL_ID
from agent_runs.errors import RunNoLongerRunning
from agent_runs.event_log import RunEventEmitter
from agent_runs.llm import UsageLog
from agent_runs.models import Message, Run
from agent_runs.stages import RunTurn, memory_stage, router_stage, worker_stage
from billing import services as billing_services

logger = logging.getLogger(__name__)

_MAX_ERROR_CHARS = 10_000
# spec/sse-events-and-usage.md, RUN_ERROR: what clients see; the cause stays in Run.error.
RUN_ERROR_MESSAGE = "runtime execution failed"


def run_claim(*, run_pk: int) -> bool:
    """Move the run from queued to running, once, and only when it is its thread's turn:
    no run of the thread is running and none was queued before it."""
    blocking = Run.objects.filter(thread_id=OuterRef("thread_id")).filter(
        Q(status=Run.Status.RUNNING) | Q(status=Run.Status.QUEUED, pk__lt=OuterRef("pk"))
    )
    claimed = (
        Run.objects.filter(pk=run_pk, status=Run.Status.QUEUED)
        .filter(~Exists(blocking))
        .update(status=Run.Status.RUNNING, started_at=timezone.now())
    )
    return claimed == 1


def run_execute(*, run_pk: int) -> None:
    """Run the pipeline (router → worker → memory) for a queued run, streaming its AG-UI
    events, and store its answer and every model call's usage.

    The run always ends ``completed`` (``RUN_FINISHED``) or ``failed`` (``RUN_ERROR``), and
    the thread's next queued run is started after it. The claim comes first and is the only
    check: a run that is not this job's to run costs one UPDATE.
    """
    try:
        claimed = run_claim(run_pk=run_pk)
    except (InterfaceError, OperationalError):
        # The worker's connection died while it waited for work (a database restart, a
        # failover): the claim changes nothing unless it succeeds, so it is tried once more,
        # on a connection the pool checks first.
        logger.warning("run %s: the database connection failed; claiming again", run_pk)
        connections.close_all()
        claimed = run_claim(run_pk=run_pk)
    if not claimed:
        logger.info("run %s is not claimable now (taken, finished or waiting its turn)", run_pk)
        return
    run, last_event_id = selectors.run_for_execution(run_pk=run_pk)
    emitter = RunEventEmitter(run=run, previous_id=last_event_id)
    ids = {"thread_id": str(run.thread_id), "run_id": run.run_id}
    try:
        emitter.emit(RunStartedEvent(**ids))
        turn = RunTurn(
            run=run,
            emitter=emitter,
            user_message=run.messages.get(role=Message.Role.USER),
            memory_notes=selectors.user_memory_notes(
                user_id=run.thread.owner_id, limit=settings.AGENT_MEMORY_MAX_ITEMS
            ),
            store_usage=partial(_store_usage, run),
        )
        decision = router_stage(turn)
        output = worker_stage(turn, decision)
        memory_stage(turn, output)
        completed = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
            status=Run.Status.COMPLETED, finished_at=timezone.now()
        )
        if not completed:
            raise RunNoLongerRunning(run.pk)
        emitter.emit(RunFinishedEvent(**ids))
    except RunNoLongerRunning:
        # Cancelled while it ran: the cancel ended the run and its stream; nothing failed.
        logger.info("run %s ended while its job ran (cancelled)", run.pk)
    except Exception as exc:
        logger.exception("run %s failed", run.pk)
        run_fail(run_pk=run.pk, error=traceback.format_exc(), code=error_code(exc), emitter=emitter)
    finally:
        services.run_dispatch_next(thread_id=run.thread_id)


def _store_usage(run: Run, usage_log: UsageLog) -> int:
    """Record the model calls a stage made since the last time (a failed or cancelled run is
    billed for the calls it made too), each in its own short transaction; how many were."""
    recorded = 0
    for call in usage_log.drain():
        if call.model_id == DEMO_MODEL_ID:
            continue  # the offline demo model is not a provider: nothing to bill
        try:
            billing_services.usage_record(
                run=run,
                stage=usage_log.stage,
                model_id=call.model_id,
                usage=call.usage,
                metadata=call.metadata,
            )
            recorded += 1
        except DatabaseError:
            # The answer matters more than its bookkeeping: keep the call for staff in the
            # log, and go on with the run.
            logger.exception(
                "run %s: usage of a %s call not recorded: %s", run.pk, usage_log.stage, call
            )
    return recorded


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
    (JobTimeoutException, "timeout"),
    (openai.APIError, "model_error"),
    (ImproperlyConfigured, "configuration_error"),
)


def run_fail(
    *,
    run_pk: int,
    error: str,
    code: str = "internal_error",
    emitter: RunEventEmitter | None = None,
) -> bool:
    """Mark a run that has not ended as failed, keeping the error for staff, and end its
    event stream with ``RUN_ERROR`` (the public message says nothing of the cause)."""
    updated = Run.objects.filter(
        pk=run_pk, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
    ).update(status=Run.Status.FAILED, error=error[-_MAX_ERROR_CHARS:], finished_at=timezone.now())
    if not updated:
        return False  # it ended otherwise (cancelled, say); whoever ended it ended its stream
    run = Run.objects.get(pk=run_pk)
    emitter = emitter or RunEventEmitter(run=run, resume=True)
    if not emitter.started:
        emitter.emit(RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id))
    if not emitter.ended:
        emitter.emit(
            RunErrorEvent(
                message=RUN_ERROR_MESSAGE,
                code=code,
                threadId=str(run.thread_id),
                runId=run.run_id,
            )
        )
    return True


def runs_recover() -> tuple[int, int]:
    """Repair what a killed worker or a lost Redis left behind; PostgreSQL is the truth.

    A ``running`` run whose job shows no sign of life is failed with ``RUN_ERROR``
    (``worker_lost``): its job's heartbeat (its worker beats every
    ``AGENT_RUN_HEARTBEAT_SECONDS`` while the job runs) is older than
    ``AGENT_RUN_STALE_SECONDS``, or Redis no longer has the job, or the run has outlived the
    job timeout. Then every thread with queued runs and none running gets its
    next run enqueued, unless that run's job is still waiting. Workers run this when they
    start and every ``AGENT_RUN_SWEEP_SECONDS``. Returns (failed, enqueued).
    """
    now = timezone.now()
    failed = 0
    for run in Run.objects.filter(status=Run.Status.RUNNING).only("pk", "task_id", "started_at"):
        if _job_is_alive(run, now=now):
            continue
        failed += run_fail(
            run_pk=run.pk, error="the worker running this run stopped", code="worker_lost"
        )
    next_runs = selectors.runs_next_queued_of_idle_threads()
    return failed, services.runs_enqueue_if_idle(runs=next_runs)


def _job_is_alive(run: Run, *, now: datetime) -> bool:
    started_at = run.started_at or now
    if now - started_at > timedelta(seconds=settings.AGENT_RUN_JOB_TIMEOUT + 60):
        return False
    stale = timedelta(seconds=settings.AGENT_RUN_STALE_SECONDS)
    try:
        job = Job.fetch(str(run.task_id), connection=services.runs_queue().connection)
    except NoSuchJobError:
        return now - started_at < stale  # Redis lost it: give it the same grace
    except RedisError:
        return True  # cannot tell: leave it for the next sweep
    heartbeat = job.last_heartbeat or job.started_at
    if job.get_status() != JobStatus.STARTED or heartbeat is None:
        return now - started_at < stale
    if heartbeat.tzinfo is None:
        heartbeat = heartbeat.replace(tzinfo=UTC)
    return now - heartbeat < stale
