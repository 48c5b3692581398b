"""The run a log line belongs to: a job sets it for the time it executes a run, and the
logging filter (``ops.logging.RunContextFilter``) adds it to every record made meanwhile,
in the job's thread and in the tasks its event loop runs for it."""

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

run_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("run_id", default=None)
thread_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "thread_id", default=None
)


@contextmanager
def run_log_context(*, run_id: str, thread_id: str) -> Iterator[None]:
    """Log lines made inside name the run ``run_id`` of the thread ``thread_id``."""
    run_token = run_id_var.set(run_id)
    thread_token = thread_id_var.set(thread_id)
    try:
        yield
    finally:
        thread_id_var.reset(thread_token)
        run_id_var.reset(run_token)
