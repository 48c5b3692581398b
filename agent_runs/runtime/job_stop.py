"""Stopping the run a worker is executing, from another thread, without killing a process.

The worker runs its jobs in its own process (agent_runs/runtime/worker.py), so cancel cannot kill a
work-horse. Instead RQ's command listener thread asks for a stop here; the asyncio task the
job is waiting on (a model call, a tool) is cancelled at once, and the job's synchronous
parts check between steps. Either way the job ends with ``RunStopped``, which unwinds it
like any error: transactions roll back, the model stream is closed and its usage recorded.
Sync code is never interrupted mid-statement, unlike an exception raised by a signal.
"""

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agent_runs.errors import RunNoLongerRunning


class RunStopped(RunNoLongerRunning):
    """The job was asked to stop (its run was cancelled) and did."""

    def __init__(self) -> None:
        super().__init__("the run's job was stopped: the run was cancelled")


class JobStop:
    """The stop request of the one job this process runs at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._job_id: str | None = None
        self._requested = False
        self._task: asyncio.Task[Any] | None = None

    def reset(self, job_id: str | None = None) -> None:
        """A new job begins: forget the last one's request."""
        with self._lock:
            self._job_id = job_id
            self._requested = False
            self._task = None

    def request(self, job_id: str | None = None) -> None:
        """Ask the running job to stop (from any thread); harmless when none runs. Given a
        job id, only that job: a request that arrives late must not stop the next one."""
        with self._lock:
            if job_id is not None and job_id != self._job_id:
                return
            self._requested = True
            task = self._task
            # A closed loop refuses the call: the job then sees the flag at its next check.
            if task is not None:
                with contextlib.suppress(RuntimeError):
                    task.get_loop().call_soon_threadsafe(task.cancel)

    def check(self) -> None:
        """Raise ``RunStopped`` if a stop was asked for: the job's synchronous checkpoint."""
        if self._requested:
            raise RunStopped()

    @contextmanager
    def watching(self, task: asyncio.Task[Any]) -> Iterator[None]:
        """While the job waits on ``task``, a stop request cancels it; a task cancelled so
        raises ``RunStopped`` out of this block instead of ``CancelledError``."""
        with self._lock:
            if self._requested:
                task.cancel()
            self._task = task
        try:
            yield
        except asyncio.CancelledError:
            if self._requested:
                raise RunStopped() from None
            raise
        finally:
            with self._lock:
                self._task = None


job_stop = JobStop()
