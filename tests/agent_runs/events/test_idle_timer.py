"""A live stream's keep-alive timer (agent_runs/events/follow.py, ``_IdleTimer``): an idle
stream is told once a period; a stream with entries waiting to be read is not idle, and its
timer waits a whole period again rather than firing at once until they are read."""

import asyncio

import pytest

from agent_runs.events.follow import _IDLE, _IdleTimer


@pytest.fixture
def period(settings):
    settings.AGENT_SSE_KEEPALIVE_SECONDS = 0.05
    return 0.05


def test_an_idle_stream_is_told_once_a_period(period):
    async def scenario() -> list[object]:
        queue: asyncio.Queue[object] = asyncio.Queue()
        timer = _IdleTimer(queue)
        try:
            await asyncio.sleep(period * 2.5)
        finally:
            timer.cancel()
        return [queue.get_nowait() for _ in range(queue.qsize())]

    # One _IDLE queued, not read: the next period finds the queue not empty.
    assert asyncio.run(scenario()) == [_IDLE]


def test_entries_waiting_keep_the_timer_a_period_away(period):
    async def scenario() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        timer = _IdleTimer(queue)
        queue.put_nowait("an entry the stream has not read yet")
        calls = 0
        due = timer._due

        def counted() -> None:
            nonlocal calls
            calls += 1
            due()

        timer._due = counted  # type: ignore[method-assign]
        timer._timer.cancel()
        timer._timer = loop.call_at(timer._last + period, timer._due)
        try:
            await asyncio.sleep(period * 3.5)
        finally:
            timer.cancel()
        return calls, timer._timer.when() - loop.time()

    calls, next_in = asyncio.run(scenario())
    # A period apart, not a spin of the loop while the entry waits.
    assert 2 <= calls <= 4
    assert next_in > 0
