"""Waiting on a run from async code: follow its thread's journal until an event the caller
names, the run's terminal event or a time limit, whichever comes first.

What a request answered with a run's outcome rather than its stream waits on (the Agent
Protocol's official step, a non-streamed Responses or A2A call): the journal says when to
look, so the wait costs no polling and holds no thread (``agent_runs/api/awaited.py``).
"""

import asyncio
import enum
import uuid
from collections.abc import Callable
from typing import Any

from agent_runs.events.follow import thread_events
from agent_runs.events.reads import EventStreamStart


class WaitEnd(enum.Enum):
    MATCHED = "matched"  # an event ``until`` names
    RUN_ENDED = "run_ended"  # the run's terminal event
    TIMED_OUT = "timed_out"


async def run_events_wait(
    *,
    thread_id: uuid.UUID,
    run_id: str,
    after_id: int,
    until: Callable[[dict[str, Any]], bool] | None = None,
    timeout: float,
) -> WaitEnd:
    """Follow the thread's events after ``after_id`` (the thread's last event when the caller
    last saw the run active, so its terminal event comes later) until one ``until`` accepts
    (if given), the run ``run_id`` ends, or ``timeout`` seconds pass."""
    start = EventStreamStart(after_id=after_id, run_id=run_id, run_ended=False)
    batches = thread_events(thread_id=thread_id, start=start, follow=False)
    try:
        async with asyncio.timeout(timeout):
            async for batch in batches:
                if until is not None and any(until(event.payload) for event in batch):
                    return WaitEnd.MATCHED
        return WaitEnd.RUN_ENDED
    except TimeoutError:
        return WaitEnd.TIMED_OUT
    finally:
        await batches.aclose()
