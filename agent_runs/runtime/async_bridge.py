"""Driving AgentScope's async code from the worker's synchronous job, one item at a time, so
the ORM can be used between items and a stop request cancels the await in flight."""

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from agent_runs.runtime.job_stop import job_stop

T = TypeVar("T")


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to its end from synchronous code, on a loop of its own."""
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(coroutine)
        with job_stop.watching(task):
            return loop.run_until_complete(task)
    finally:
        # A model stream left half-read (the structured output stops at its last chunk),
        # and the streams inside it that closing it lets go.
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


def _run_until_done(
    loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], *, timeout: float
) -> bool:
    """Run the loop until ``task`` is done or ``timeout`` seconds pass; whether it is done.
    (``asyncio.wait`` with a timeout does the same with a future, a waiter and their
    callbacks, at several times the cost, for every item of every reply.)"""
    waiting = True

    def stop(_: Any = None) -> None:
        # The task's done callback may already be scheduled when the timer ends the wait:
        # run later, it must not stop the loop's next run.
        if waiting:
            loop.stop()

    timer = loop.call_later(timeout, stop)
    task.add_done_callback(stop)
    try:
        loop.run_forever()
    finally:
        waiting = False
        timer.cancel()
        task.remove_done_callback(stop)
    return task.done()


def iterate_async(
    generator: AsyncIterator[T],
    *,
    on_idle: Callable[[], None] | None = None,
    idle_after: float = 0.005,
) -> Iterator[T]:
    """Drive an async generator from synchronous code, one item at a time.

    The event loop runs only while the generator computes its next item, so the caller may
    use the ORM between items (Django refuses it while a loop is running in the thread).
    ``on_idle`` is called, with the loop paused, once the generator has been quiet for
    ``idle_after`` seconds (the job flushes its pending events then). A stop request
    (``job_stop``) cancels the item being computed and raises ``RunStopped``.
    """
    loop = asyncio.new_event_loop()
    task: asyncio.Task[T] | None = None

    async def next_item() -> T:
        return await anext(generator)

    try:
        while True:
            job_stop.check()
            task = loop.create_task(next_item())
            with job_stop.watching(task):
                if on_idle is not None and not _run_until_done(loop, task, timeout=idle_after):
                    on_idle()
                try:
                    # Most items are ready within the wait: no second turn of the loop.
                    item = task.result() if task.done() else loop.run_until_complete(task)
                except StopAsyncIteration:
                    return
            yield item
    finally:
        # Stopped mid-item (on_idle raised, or a job timeout struck): end that item first,
        # so the generator can close, which closes the model's stream and records its usage.
        if task is not None and not task.done():
            task.cancel()
            loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
        close = getattr(generator, "aclose", None)
        if close is not None:
            loop.run_until_complete(close())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
