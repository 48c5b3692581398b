"""RQ entry points: they take ids and call one service."""

import logging
import uuid
from functools import partial
from typing import Any

from django.db import DatabaseError

from agent_runs import metrics
from agent_runs.log_context import run_log_context
from agent_runs.models import Run
from agent_runs.runtime.execution import error_code, run_execute, with_reconnect
from agent_runs.runtime.job_stop import job_stop
from agent_runs.services.lifecycle import run_dispatch_next, run_fail
from agent_runs.services.push import push_delivery_attempt

logger = logging.getLogger(__name__)

_ENDED = (Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED)
_MEASURED_FIELDS = ("run_id", "thread_id", "status", "claim_token", "created_at", "started_at")


def _measured(run_pk: int) -> dict[str, Any] | None:
    return Run.objects.filter(pk=run_pk).values(*_MEASURED_FIELDS, "finished_at").first()


def run_execute_job(run_pk: int) -> None:
    before = with_reconnect(partial(_measured, run_pk))
    if before is None:
        return  # deleted with its thread since it was queued
    # Every log line from here to the end names the run (ops/logging.py).
    with run_log_context(run_id=before["run_id"], thread_id=str(before["thread_id"])):
        logger.info("run %s: job started (%s)", run_pk, before["status"])
        run_execute(run_pk=run_pk)
        _run_measure(run_pk=run_pk, before=before)
    # Stopped by a cancel (the run is cancelled already): RQ then marks the job STOPPED,
    # not finished.
    job_stop.check()


def _run_measure(*, run_pk: int, before: dict[str, Any]) -> None:
    """The run in this worker's metrics (docs/operations.md): its wait for its first claim,
    and its duration from then, when it ended while this job ran it. A claim gives the run a
    new ``claim_token`` (cleared again when it parks): a run that kept both its token and its
    status was not run by this job."""
    try:
        after = _measured(run_pk)
    except DatabaseError:  # the run is done with; only its figures are lost
        logger.warning("run %s: not measured", run_pk, exc_info=True)
        return
    if after is None or after["started_at"] is None:
        return
    if after["claim_token"] == before["claim_token"] and after["status"] == before["status"]:
        return
    if before["started_at"] is None:
        wait = after["started_at"] - after["created_at"]
        metrics.RUN_QUEUE_WAIT.observe(max(wait.total_seconds(), 0.0))
    if after["status"] in _ENDED and after["finished_at"] is not None:
        duration = after["finished_at"] - after["started_at"]
        seconds = max(duration.total_seconds(), 0.0)
        metrics.RUNS_FINISHED.labels(after["status"]).inc()
        metrics.RUN_DURATION.labels(after["status"]).observe(seconds)
        logger.info("run %s %s after %.2f s", run_pk, after["status"], seconds)


def run_job_failed(job: Any, connection: Any, exc_type: Any, exc_value: Any, tb: Any) -> None:
    """RQ's failure callback: the job died outside our own error handling (a timeout or a
    cold shutdown of its worker), so the run must not stay ``running``."""
    run_pk = job.args[0]

    def fail() -> None:
        failed = run_fail(
            run_pk=run_pk,
            error=f"the job failed: {exc_type.__name__}: {exc_value}",
            code=error_code(exc_value),
        )
        thread_id = Run.objects.filter(pk=run_pk).values_list("thread_id", flat=True).first()
        if failed and thread_id is not None:
            metrics.RUNS_FINISHED.labels(Run.Status.FAILED).inc()
            run_dispatch_next(thread_id=thread_id)

    with_reconnect(fail)


def push_deliver_job(delivery_id: str) -> None:
    """One attempt at a push notification (agent_runs/services/push.py)."""
    push_delivery_attempt(delivery_id=uuid.UUID(delivery_id))
