"""Where RQ jobs queued before the move to ``agent_runs.runtime`` find their functions: a
re-export kept for one release (a queued job names its function by dotted path)."""

from agent_runs.runtime.jobs import run_execute_job, run_job_failed

__all__ = ["run_execute_job", "run_job_failed"]
