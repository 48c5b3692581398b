"""RQ entry points: they take ids and call one service."""

from typing import Any

from agent_runs.execution import error_code, run_execute, run_fail


def run_execute_job(run_pk: int) -> None:
    run_execute(run_pk=run_pk)


def run_job_failed(job: Any, connection: Any, exc_type: Any, exc_value: Any, tb: Any) -> None:
    """RQ's failure callback: the job died outside our own error handling (a timeout or a
    killed work-horse), so the run must not stay ``running``."""
    run_fail(
        run_pk=job.args[0],
        error=f"the job failed: {exc_type.__name__}: {exc_value}",
        code=error_code(exc_value),
    )
