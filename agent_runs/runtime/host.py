"""The runs a worker process holds at once (docs/architecture.md, "The worker").

One event loop, on a thread of its own, runs every job the worker has taken as a task of its
own, up to ``WORKER_CONCURRENCY`` at a time: a run spends nearly all its life waiting for its
model, so one process holds many. What a run does with the database runs on a bounded pool
of threads (``WORKER_DB_THREADS``), the loop's default executor, each keeping its connection
from one call to the next: the connections a worker holds do not grow with its runs.

A job ends its life here in one of four ways, which its task's ``HeldJob.ending`` tells:
it returns (or raises) on its own; it is stopped because its run was cancelled (RQ's
stop-job command, or its heartbeat found the run no longer its own); its time is up (the
job's timeout); or the worker stops cold. The last three cancel the task, which unwinds like
any error at the await it was in: a model call is closed, a transaction rolls back.
"""

import asyncio
import contextlib
import contextvars
import enum
import logging
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from django.db import InterfaceError, OperationalError, close_old_connections, connections
from django.db import connection as db_connection

logger = logging.getLogger(__name__)

T = TypeVar("T")
_RECONNECT_ATTEMPTS = 5
_RECONNECT_PAUSE_SECONDS = 0.5


class Ending(enum.Enum):
    """Why a held job's task was cancelled (``None`` while nobody has)."""

    STOPPED = "stopped"  # its run was cancelled, or is no longer its own
    TIMED_OUT = "timed_out"
    SHUTDOWN = "shutdown"


@dataclass(frozen=True)
class Claim:
    """The run a job is executing and the claim that makes its writes count."""

    run_pk: int
    token: uuid.UUID


@dataclass(eq=False)
class HeldJob:
    """A job the host holds: RQ's job and its bookkeeping, the task that runs it, and the
    claim of the run it executes once it has one (what the heartbeat renews)."""

    job_id: str
    timeout: float | None
    payload: Any = None  # RQ's job, queue and execution: the worker's to finish with
    task: "asyncio.Task[Any] | None" = None
    claim: Claim | None = None
    ending: Ending | None = None
    timer: asyncio.TimerHandle | None = None
    started: float = field(default_factory=time.monotonic)
    # Called once (``begin``), when the job's run is claimed or the job ends, whichever
    # comes first: what its owner defers until then (a worker's bookkeeping in RQ).
    begun: Callable[["HeldJob"], object] | None = None

    def begin(self) -> None:
        """The job's work has begun (its run is claimed) or is over: ``begun``, once."""
        begun, self.begun = self.begun, None
        if begun is not None:
            begun(self)


async def db(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)`` on one of the loop's database threads (its default
    executor: a host's bounded pool), which keep their connections from one call to the
    next; a connection that failed is given back after the call."""
    return await asyncio.get_running_loop().run_in_executor(
        None, partial(_on_db_thread, function, *args, **kwargs)
    )


# A thread's connection idle this long may have been cut meanwhile (a restart, a failover):
# it is checked (a round trip) before it is used again.
_RECHECK_CONNECTION_AFTER_SECONDS = 1.0
_thread_state = threading.local()


def _on_db_thread(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    last_used = getattr(_thread_state, "last_used", 0.0)
    if (
        time.monotonic() - last_used > _RECHECK_CONNECTION_AFTER_SECONDS
        and db_connection.connection is not None
        and not db_connection.is_usable()
    ):
        db_connection.close()
    try:
        return function(*args, **kwargs)
    finally:
        _thread_state.last_used = time.monotonic()
        if any(connection.errors_occurred for connection in connections.all()):
            close_old_connections()  # gives back a connection that failed


async def db_retried(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``db`` for a call that changes nothing unless it succeeds (a read, one transaction),
    or is fenced: tried again on a new connection when the database cut the one it used."""
    return await db(with_reconnect, partial(function, *args, **kwargs))


def with_reconnect(call: Callable[[], T]) -> T:
    """``call()``, again on a new connection when the database cut the one it used (tried
    a few times, half a second apart, to ride out a restart). Only for calls that change
    nothing unless they succeed, or are fenced."""
    for attempt in range(_RECONNECT_ATTEMPTS):
        try:
            return call()
        except (InterfaceError, OperationalError):
            if attempt == _RECONNECT_ATTEMPTS - 1:
                raise
            logger.warning("the database connection failed; reconnecting", exc_info=True)
            connections.close_all()
            time.sleep(_RECONNECT_PAUSE_SECONDS * attempt)
    raise AssertionError("unreachable")


_held: contextvars.ContextVar[HeldJob | None] = contextvars.ContextVar("held_job", default=None)


def current_job() -> HeldJob | None:
    """The held job whose task is running (``None`` outside a host, say in a test)."""
    return _held.get()


def claim_register(claim: Claim | None) -> None:
    """The running job now executes this run under this claim (``None``: no longer)."""
    held = _held.get()
    if held is not None:
        held.claim = claim
        if claim is not None:
            held.begin()


class RunHost:
    """An event loop on a thread of its own that runs up to ``concurrency`` jobs at once."""

    def __init__(self, *, concurrency: int, db_threads: int) -> None:
        self.concurrency = concurrency
        self.loop = asyncio.new_event_loop()
        # Every ``run_in_executor(None, …)`` and ``asyncio.to_thread`` of the runs (their
        # database work, synchronous tools) shares these threads.
        self._db_threads = db_threads
        self.db_executor = ThreadPoolExecutor(max_workers=db_threads, thread_name_prefix="run-db")
        self.loop.set_default_executor(self.db_executor)
        self._thread = threading.Thread(target=self._serve, name="run-loop", daemon=True)
        self._changed = threading.Condition()
        self._held: dict[str, HeldJob] = {}

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> None:
        self._thread.start()

    def db_submit(self, function: Callable[..., T], /, *args: Any) -> "Future[T]":
        """``db`` from another thread: ``function(*args)`` on one of the database threads at
        once; a task awaits its result with ``asyncio.wrap_future``."""
        return self.db_executor.submit(_on_db_thread, function, *args)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the loop from another thread and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    # -- the jobs held ---------------------------------------------------------------

    def held(self) -> list[HeldJob]:
        with self._changed:
            return list(self._held.values())

    def count(self) -> int:
        with self._changed:
            return len(self._held)

    def submit(
        self,
        held: HeldJob,
        work: Callable[[], Coroutine[Any, Any, Any]],
        done: Callable[[HeldJob, "asyncio.Future[Any]"], None],
    ) -> None:
        """Run ``work()`` as the job's task; ``done(held, task)`` once it has ended (on the
        loop: hand anything blocking to another thread), after which the job is let go."""
        with self._changed:
            self._held[held.job_id] = held
            self._changed.notify_all()

        def begin() -> None:
            token = _held.set(held)
            try:
                task = self.loop.create_task(work())
            finally:
                _held.reset(token)
            held.task = task
            if held.ending is not None:  # stopped before it began
                task.cancel()
            elif held.timeout is not None and held.timeout > 0:
                # Cancelled when the job ends: a timer left to fire would keep the job (and
                # RQ's objects with it) for the whole timeout, thousands of them under load.
                held.timer = self.loop.call_later(held.timeout, self._time_up, held)
            task.add_done_callback(lambda finished: self._ended(held, finished, done))

        self.loop.call_soon_threadsafe(begin)

    def _ended(
        self,
        held: HeldJob,
        task: "asyncio.Future[Any]",
        done: Callable[[HeldJob, "asyncio.Future[Any]"], None],
    ) -> None:
        if held.timer is not None:
            held.timer.cancel()
        try:
            held.begin()  # before its ending, whatever happened
            done(held, task)
        finally:
            with self._changed:
                self._held.pop(held.job_id, None)
                self._changed.notify_all()

    def _time_up(self, held: HeldJob) -> None:
        if held.task is not None and not held.task.done() and held.ending is None:
            logger.warning("job %s ran out of time: cancelling it", held.job_id)
            held.ending = Ending.TIMED_OUT
            held.task.cancel()

    def stop(self, job_id: str, ending: Ending = Ending.STOPPED) -> bool:
        """Cancel a held job's task (from any thread); whether the host holds the job."""
        with self._changed:
            held = self._held.get(job_id)
        if held is None:
            return False

        def cancel() -> None:
            if held.ending is None:
                held.ending = ending
            if held.task is not None:
                held.task.cancel()

        self.loop.call_soon_threadsafe(cancel)
        return True

    def stop_all(self, ending: Ending = Ending.SHUTDOWN) -> None:
        for held in self.held():
            self.stop(held.job_id, ending)

    def wait_for_slot(self, *, timeout: float) -> bool:
        """Wait until fewer than ``concurrency`` jobs are held (at most ``timeout`` s)."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._held) < self.concurrency, timeout)

    def wait_for_change(self, *, timeout: float) -> bool:
        """Wait until a job ends (or ``timeout`` s); whether any is still held."""
        with self._changed:
            before = set(self._held)
            self._changed.wait_for(lambda: set(self._held) != before, timeout)
            return bool(self._held)

    def wait_idle(self, *, timeout: float) -> bool:
        """Wait until no job is held; whether none is."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._held, timeout)

    def close(self) -> None:
        """Stop the loop and its threads (once every job has ended)."""
        if self._thread.is_alive():
            future: Future[None] = asyncio.run_coroutine_threadsafe(_settle(), self.loop)
            try:
                future.result(timeout=5)
            except Exception:  # the loop is going away anyway
                logger.warning("the run loop did not settle", exc_info=True)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
        _close_connections(self.db_executor, self._db_threads)
        self.db_executor.shutdown(wait=True)
        if not self.loop.is_running():
            self.loop.close()


def _close_connections(executor: ThreadPoolExecutor, threads: int) -> None:
    """Give back every database thread's connection (each thread closes its own: a task
    each, held at a barrier until all have one, so that no thread takes two)."""
    barrier = threading.Barrier(threads)

    def close() -> None:
        connections.close_all()
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=5)

    for future in [executor.submit(close) for _ in range(threads)]:
        future.result(timeout=10)


async def _settle() -> None:
    """Give what the last jobs left scheduled (a stream's clean-up) its turn."""
    await asyncio.sleep(0)


def raise_if_cancelled() -> None:
    """Go on unwinding a cancel that an await swallowed: AgentScope takes a cancelled reply
    for an interrupted one and ends it as if normally, while the job was stopped."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError()
