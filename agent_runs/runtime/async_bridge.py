"""Driving AgentScope's async code from synchronous code (a warm-up, a management command,
a test): each thread drives its coroutines on one event loop of its own that lives as long
as the thread (``bridge_loop``), so what is bound to a loop, like the HTTP connections a
model keeps to its provider, serves every call. A worker's runs do not come through here:
they are tasks on its host's loop (agent_runs/runtime/host.py)."""

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_thread_state = threading.local()


def bridge_loop() -> asyncio.AbstractEventLoop:
    """The loop the caller runs on, if any; else the calling thread's own loop, made on
    first use and kept (never running between the calls that drive it)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    loop: asyncio.AbstractEventLoop | None = getattr(_thread_state, "loop", None)
    if loop is None or loop.is_closed():
        loop = _thread_state.loop = asyncio.new_event_loop()
    return loop


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to its end from synchronous code, on the thread's loop."""
    loop = bridge_loop()
    task = loop.create_task(coroutine)
    try:
        return loop.run_until_complete(task)
    finally:
        _settle(loop, task)


def _settle(loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any] | None) -> None:
    """End what a call left behind on the loop: the task itself when it was interrupted
    mid-await, and a model stream left half-read (the structured output stops at its last
    chunk), whose clean-up its finaliser has scheduled."""
    if task is not None and not task.done():
        task.cancel()
        loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
    loop.run_until_complete(asyncio.sleep(0))


async def drain(generator: AsyncIterator[Any]) -> list[Any]:
    """Every item of an async generator (a reply run for its effects)."""
    return [item async for item in generator]
