"""Driving coroutines from synchronous code (agent_runs/runtime/async_bridge.py): one loop
per thread kept from call to call, and nothing left running after a call."""

import asyncio
import threading

from agent_runs.runtime.async_bridge import bridge_loop, drain, run_coroutine


async def items(*steps: float | str):
    """Yield each string; sleep for each number (a model that pauses)."""
    for step in steps:
        if isinstance(step, str):
            yield step
        else:
            await asyncio.sleep(step)


def test_items_come_in_order_on_the_threads_one_loop():
    async def loop_of_call() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    assert run_coroutine(drain(items("a", 0, "b", 0.01, "c"))) == ["a", "b", "c"]
    first = run_coroutine(loop_of_call())
    assert run_coroutine(loop_of_call()) is first is bridge_loop()
    assert not first.is_running()  # between calls the job may use the ORM

    other: list[asyncio.AbstractEventLoop] = []
    thread = threading.Thread(target=lambda: other.append(run_coroutine(loop_of_call())))
    thread.start()
    thread.join()
    assert other[0] is not first  # each thread its own


def test_a_generator_left_half_read_is_closed_before_the_call_returns():
    # The structured output stops reading the model's stream at its last chunk.
    closed = threading.Event()

    async def stream():
        try:
            yield 1
            yield 2
        finally:
            closed.set()

    async def first_item() -> int:
        async for item in stream():
            return item
        return 0

    assert run_coroutine(first_item()) == 1
    assert closed.is_set()
