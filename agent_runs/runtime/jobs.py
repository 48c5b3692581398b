"""RQ entry points: they take ids and call one service."""

import uuid
from typing import Any

from agent_runs import metrics
from agent_runs.models import Run
from agent_runs.push.services import push_delivery_attempt
from agent_runs.runtime.execution import error_code, run_execute
from agent_runs.runtime.host import with_reconnect
from agent_runs.services.lifecycle import run_dispatch_next, run_fail


async def run_execute_job(run_pk: int) -> None:
    """A run's job: a coroutine, which the worker runs on its loop beside its other runs
    (agent_runs/runtime/host.py); a plain RQ worker runs it with ``asyncio.run``."""
    await run_execute(run_pk=run_pk)


def run_job_failed(job: Any, connection: Any, exc_type: Any, exc_value: Any, tb: Any) -> None:
    """RQ's failure callback: the job died outside our own error handling (a cold shutdown
    of its worker, a job stopped before it began), so the run must not stay ``running``."""
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
    """One attempt at a push notification (agent_runs/push/services.py)."""
    push_delivery_attempt(delivery_id=uuid.UUID(delivery_id))
