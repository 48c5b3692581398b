"""Putting runs on the RQ queue, and stopping a running run's job."""

import logging
import time
from collections.abc import Sequence

from django.conf import settings
from django.db import connection as db_connection
from redis.exceptions import RedisError
from rq import Callback
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus

from agent_runs.models import Run
from agent_runs.queues import runs_queue

logger = logging.getLogger(__name__)

# Named by dotted path: the core never imports the runtime (it runs on the worker).
RUN_JOB = "agent_runs.runtime.jobs.run_execute_job"
RUN_JOB_FAILED = "agent_runs.runtime.jobs.run_job_failed"
_STOP_WAIT_SECONDS = 2.0


def run_enqueue(*, run: Run) -> None:
    """Put the run's job on the queue. Redis being down loses nothing: the run stays
    ``queued`` in the database and the worker's recovery enqueues it again."""
    queue = runs_queue()
    job = {
        "job_id": str(run.task_id),
        "job_timeout": settings.AGENT_RUN_JOB_TIMEOUT,
        "on_failure": Callback(RUN_JOB_FAILED),
        "result_ttl": 3600,
        "failure_ttl": 7 * 24 * 3600,
    }
    try:
        if db_connection.in_atomic_block:
            # django_rq holds the job until the transaction commits.
            queue.enqueue(RUN_JOB, run.pk, **job)
            return
        # One round trip: RQ's own enqueue makes two when it is given no pipeline.
        with queue.connection.pipeline() as pipe:
            queue.enqueue(RUN_JOB, run.pk, pipeline=pipe, **job)
            pipe.execute()
    except RedisError:
        logger.exception("could not enqueue run %s; it stays queued for recovery", run.pk)


# A job in one of these is still to run (or running): enqueueing it again would run it twice.
PENDING_JOB_STATUSES = {
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
        if job is not None and job.get_status(refresh=False) in PENDING_JOB_STATUSES:
            continue
        run_enqueue(run=run)
        enqueued += 1
    return enqueued


def job_stop(*, job_id: str, wait: bool = True) -> None:
    """Have the worker stop the job (agent_runs/runtime/job_stop.py), and by default wait
    (briefly) until it has. Its writes are fenced on its claim anyway: the wait is so that
    its model call is stopped before the caller answers."""
    connection = runs_queue().connection
    try:
        send_stop_job_command(connection, job_id)
    except (InvalidJobOperation, NoSuchJobError, RedisError):
        return  # not executing (any more), or Redis lost it: nothing to stop
    if not wait:
        return
    deadline = time.monotonic() + _STOP_WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            if Job.fetch(job_id, connection=connection).get_status() != JobStatus.STARTED:
                return
        except (NoSuchJobError, RedisError):
            return
        time.sleep(0.02)
    logger.warning("job %s did not stop within %.1f s", job_id, _STOP_WAIT_SECONDS)
