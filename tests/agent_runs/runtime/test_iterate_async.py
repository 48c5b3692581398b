"""Driving a reply's async generator from the job's synchronous code
(agent_runs/runtime/async_bridge.py): items in order, the idle hook when the model pauses,
and a stop that cancels what is awaited."""

import asyncio
import threading
import time

import pytest

from agent_runs.runtime.async_bridge import iterate_async, run_coroutine
from agent_runs.runtime.job_stop import RunStopped, job_stop


async def items(*steps: float | str):
    """Yield each string; sleep for each number (a model that pauses)."""
    for step in steps:
        if isinstance(step, str):
            yield step
        else:
            await asyncio.sleep(step)


def test_items_come_in_order_and_the_idle_hook_runs_only_when_the_generator_pauses():
    idle: list[int] = []
    got: list[str] = []

    for item in iterate_async(
        items("a", 0, "b", 0.5, "c", "d"), on_idle=lambda: idle.append(len(got)), idle_after=0.1
    ):
        got.append(item)

    assert got == ["a", "b", "c", "d"]
    assert idle == [2]  # once, during the long pause after "b"; not for the short one


def test_the_idle_hook_runs_with_the_loop_paused():
    running: list[bool] = []

    def on_idle() -> None:
        try:
            asyncio.get_running_loop()
            running.append(True)
        except RuntimeError:
            running.append(False)

    assert list(iterate_async(items(0.05, "x"), on_idle=on_idle)) == ["x"]
    assert running == [False]  # so the job may use the ORM there


def test_a_stop_request_cancels_the_awaited_item_and_closes_the_generator():
    closed = threading.Event()

    async def slow_model():
        try:
            yield "first"
            await asyncio.sleep(30)
            yield "never"
        finally:
            closed.set()

    job_stop.reset()
    got: list[str] = []
    timer = threading.Timer(0.1, job_stop.request)  # RQ's listener thread, as it were
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(RunStopped):
            for item in iterate_async(slow_model(), on_idle=lambda: None):
                got.append(item)
    finally:
        timer.cancel()
        job_stop.reset()

    assert got == ["first"]
    assert time.monotonic() - started < 2
    assert closed.is_set()


def test_a_stop_requested_before_a_coroutine_runs_stops_it_at_once():
    job_stop.reset()
    job_stop.request()
    try:
        with pytest.raises(RunStopped):
            run_coroutine(asyncio.sleep(30))
    finally:
        job_stop.reset()


def test_items_that_end_just_as_the_idle_wait_does_never_stop_the_next_wait():
    # An item that ends in the loop turn where the idle wait runs out leaves the task's done
    # callback queued: run by the next wait, it must not stop that one (it once did, and the
    # run failed with "Event loop stopped before Future completed"). An idle wait of 0 makes
    # every item end in that turn.
    got = list(iterate_async(items("a", "b", "c"), on_idle=lambda: None, idle_after=0))

    assert got == ["a", "b", "c"]


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
