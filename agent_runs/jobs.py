"""RQ entry points: they take ids and call one service."""

from typing import Any

from agent_runs.execution import error_code, run_execute, run_fail
from agent_runs.job_stop import job_stop


def run_execute_job(run_pk: int) -> None:
    run_execute(run_pk=run_pk)
    # Stopped by a cancel (the run is cancelled already): RQ then marks the job STOPPED,
    # not finished.
    job_stop.check()


def run_job_failed(job: Any, connection: Any, exc_type: Any, exc_value: Any, tb: Any) -> None:
    """RQ's failure callback: the job died outside our own error handling (a timeout or a
    cold shutdown of its worker), so the run must not stay ``running``."""
    run_fail(
        run_pk=job.args[0],
        error=f"the job failed: {exc_type.__name__}: {exc_value}",
        code=error_code(exc_value),
    )
