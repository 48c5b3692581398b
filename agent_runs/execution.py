"""Executing a run on the worker: claim it once, answer, store, finish; then start the next.

Only the worker imports this module (it imports AgentScope through the pipeline).
"""

import asyncio
import logging
import traceback
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from agent_runs import selectors, services
from agent_runs.models import Message, Run, Thread
from agent_runs.pipeline import pipeline_answer

logger = logging.getLogger(__name__)

_MAX_ERROR_CHARS = 10_000
WORKER_STAGE = "worker"


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
    """Run the pipeline for a queued run and store its answer; the run always ends
    ``completed`` or ``failed``, and the thread's next queued run is started after it.

    The claim comes first and is the only check: a run that is not this job's to run costs
    one UPDATE (the job may be a duplicate, or early for its thread's turn)."""
    if not run_claim(run_pk=run_pk):
        logger.info("run %s is not claimable now (taken, finished or waiting its turn)", run_pk)
        return
    run = Run.objects.get(pk=run_pk)
    try:
        user_message = run.messages.get(role=Message.Role.USER)
        answer = asyncio.run(pipeline_answer(user_text=user_message.content))
        with transaction.atomic():
            thread = Thread.objects.select_for_update().get(pk=run.thread_id)
            message_id = f"{WORKER_STAGE}-{run.run_id}"
            services.message_append(
                thread=thread,
                run=run,
                role=Message.Role.ASSISTANT,
                message_id=message_id,
                content=answer.text,
                metadata={
                    "run_id": run.run_id,
                    "stage": WORKER_STAGE,
                    "latency_ms": answer.latency_ms,
                    "message_id": message_id,
                },
            )
            Run.objects.filter(pk=run.pk).update(
                status=Run.Status.COMPLETED, finished_at=timezone.now()
            )
    except Exception:
        logger.exception("run %s failed", run.pk)
        run_fail(run_pk=run.pk, error=traceback.format_exc())
    finally:
        run_dispatch_next(thread_id=run.thread_id)


def run_fail(*, run_pk: int, error: str) -> bool:
    """Mark a run that has not ended as failed, keeping the error for staff."""
    updated = Run.objects.filter(
        pk=run_pk, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
    ).update(status=Run.Status.FAILED, error=error[-_MAX_ERROR_CHARS:], finished_at=timezone.now())
    return updated == 1


def run_dispatch_next(*, thread_id: uuid.UUID) -> None:
    """Enqueue the thread's oldest queued run, whose job may have found it not its turn."""
    run = selectors.run_next_queued(thread_id=thread_id)
    if run is not None:
        services.run_enqueue(run=run)


def runs_recover() -> tuple[int, int]:
    """Repair what a lost Redis or a killed worker left behind; PostgreSQL is the truth.

    Runs still ``running`` long past the job timeout belong to a dead worker: failed.
    Every thread with queued runs and none running gets its next run enqueued again
    (a duplicate job is harmless: a run is claimed once). Returns (failed, enqueued).
    """
    stale_before = timezone.now() - timedelta(seconds=settings.AGENT_RUN_JOB_TIMEOUT + 60)
    failed = 0
    for run_pk in Run.objects.filter(
        status=Run.Status.RUNNING, started_at__lt=stale_before
    ).values_list("pk", flat=True):
        failed += run_fail(run_pk=run_pk, error="the worker running this run stopped")
    thread_ids = (
        Run.objects.filter(status=Run.Status.QUEUED)
        .exclude(thread__runs__status=Run.Status.RUNNING)
        .values_list("thread_id", flat=True)
        .distinct()
    )
    enqueued = 0
    for thread_id in thread_ids:
        run_dispatch_next(thread_id=thread_id)
        enqueued += 1
    return failed, enqueued
