"""Driving a reply's coroutines from the job's synchronous code
(agent_runs/runtime/async_bridge.py): one loop per thread kept from call to call, a stop that
cancels what is awaited, and nothing left running after a call."""

import asyncio
import threading
import time

import pytest

from agent_runs.runtime.async_bridge import bridge_loop, drain, run_coroutine
from agent_runs.runtime.job_stop import RunStopped, job_stop


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


def test_a_stop_request_cancels_the_awaited_reply_and_closes_its_generator():
    closed = threading.Event()

    async def slow_model():
        try:
            yield "first"
            await asyncio.sleep(30)
            yield "never"
        finally:
            closed.set()

    got: list[str] = []

    async def relay() -> None:
        generator = slow_model()
        try:
            async for item in generator:
                got.append(item)
        finally:
            await generator.aclose()

    job_stop.reset()
    timer = threading.Timer(0.1, job_stop.request)  # RQ's listener thread, as it were
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(RunStopped):
            run_coroutine(relay())
    finally:
        timer.cancel()
        job_stop.reset()

    assert got == ["first"]
    assert time.monotonic() - started < 2
    assert closed.is_set()
    assert run_coroutine(drain(items("after"))) == ["after"]  # the loop serves the next job


def test_a_stop_requested_before_a_coroutine_runs_stops_it_at_once():
    job_stop.reset()
    job_stop.request()
    try:
        with pytest.raises(RunStopped):
            run_coroutine(asyncio.sleep(30))
    finally:
        job_stop.reset()


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


def test_a_stop_request_for_another_job_is_ignored():
    job_stop.reset(job_id="job-2")
    try:
        job_stop.request(job_id="job-1")  # arrived after job-1 ended and job-2 began
        job_stop.check()  # job-2 goes on
        job_stop.request(job_id="job-2")
        with pytest.raises(RunStopped):
            job_stop.check()
    finally:
        job_stop.reset()
