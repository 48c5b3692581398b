"""Driving AgentScope's async code from the worker's synchronous job, so that a stop request
cancels the await in flight. The ORM is used before and after, never inside (Django refuses
it in a thread whose event loop runs); a reply's events are written meanwhile by the
emitter, from the same loop.

Each thread drives its coroutines on one event loop of its own that lives as long as the
thread (``bridge_loop``): what is bound to a loop, like the HTTP connections a model keeps
to its provider, serves every run of the worker, not one reply."""

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

from agent_runs.runtime.job_stop import job_stop

T = TypeVar("T")

_thread_state = threading.local()


def bridge_loop() -> asyncio.AbstractEventLoop:
    """The calling thread's event loop, made on first use and kept (never running between
    the calls that drive it)."""
    loop: asyncio.AbstractEventLoop | None = getattr(_thread_state, "loop", None)
    if loop is None or loop.is_closed():
        loop = _thread_state.loop = asyncio.new_event_loop()
    return loop


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to its end from synchronous code, on the thread's loop."""
    loop = bridge_loop()
    task = loop.create_task(coroutine)
    try:
        with job_stop.watching(task):
            return loop.run_until_complete(task)
    finally:
        _settle(loop, task)


def _settle(loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any] | None) -> None:
    """End what a call left behind on the loop: the task itself when a job timeout struck
    mid-await, and a model stream left half-read (the structured output stops at its last
    chunk), whose clean-up its finaliser has scheduled."""
    if task is not None and not task.done():
        task.cancel()
        loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
    loop.run_until_complete(asyncio.sleep(0))


async def drain(generator: AsyncIterator[Any]) -> list[Any]:
    """Every item of an async generator (a reply run for its effects)."""
    return [item async for item in generator]
