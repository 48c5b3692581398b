"""A thread's journal as one ordered stream: replay from PostgreSQL, then live from Redis.

The only replay + live merge of the project: every protocol frames what it yields its own
way (AG-UI as SSE, the others through their translators). docs/spec/sse-events-and-usage.md,
sections 1-2. The stream subscribes to the process's stream hub before it replays, so an
event committed during the replay is either replayed or read live (and dropped the second
time by id). Each live entry names the thread's previous event id: when it is not the last
one sent, Redis missed something and PostgreSQL fills the gap. When Redis fails, or the
reader is too slow, the hub says so and PostgreSQL is read.
"""

import asyncio
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from django.conf import settings

from agent_runs.db import db_call
from agent_runs.events.codec import TERMINAL_TYPES, Event, StoredEntry
from agent_runs.events.emitter import stream_key
from agent_runs.events.hub import RESET, Subscription, stream_hub
from agent_runs.events.reads import EventStreamStart, events_after

__all__ = ["Event", "thread_events"]

_REPLAY_PAGE = 1000
_IDLE_PERIODS_PER_CHECK = 4


@dataclass
class _Cursor:
    thread_id: uuid.UUID
    last_seen: int
    run_id: str | None  # whose terminal event ends the stream (unless it follows)
    follow: bool
    # Without a cursor the stream starts at this run's RUN_STARTED: what comes before it
    # (the end of an earlier run still running) is not sent.
    await_run_start: bool
    done: bool = False

    def take(self, batch: list[Event], event: Event) -> None:
        self.last_seen = event.id
        if self.await_run_start:
            if event.type != "RUN_STARTED" or event.run_id != self.run_id:
                return
            self.await_run_start = False
        batch.append(event)
        if not self.follow and event.type in TERMINAL_TYPES and event.run_id == self.run_id:
            self.done = True


async def thread_events(
    *, thread_id: uuid.UUID, start: EventStreamStart, follow: bool
) -> AsyncGenerator[list[Event], None]:
    """Batches of the thread's events after ``start.after_id``, in id order, ending after the
    chosen run's terminal event unless ``follow``. An empty batch means the stream is idle
    (a keep-alive is due)."""
    if start.run_ended and not follow:
        return
    subscription = await stream_hub().subscribe(stream_key(thread_id))  # before the replay
    try:
        cursor = _Cursor(thread_id, start.after_id, start.run_id, follow, start.await_run_start)
        async for batch in _replay(cursor):
            yield batch
            del batch  # a stream idles for minutes: it keeps nothing it has handed on
        async for batch in _live(subscription, cursor):
            yield batch
            del batch
    finally:
        subscription.close()


async def _replay(cursor: _Cursor) -> AsyncIterator[list[Event]]:
    """Every committed event after the cursor, page by page, from PostgreSQL."""
    while not cursor.done:
        rows = await db_call(
            events_after, thread_id=cursor.thread_id, after_id=cursor.last_seen, limit=_REPLAY_PAGE
        )
        batch: list[Event] = []
        for event_id, seq, kind, run_id, data, at in rows:
            cursor.take(batch, Event(event_id, seq, data, type=kind, run_id=run_id, at=at))
            if cursor.done:
                break
        if batch:
            yield batch
        if cursor.done or len(rows) < _REPLAY_PAGE:
            return


async def _live(subscription: Subscription, cursor: _Cursor) -> AsyncIterator[list[Event]]:
    """Events as Redis receives them, everything the hub has handed on since the last look
    in one batch; an empty batch (and now and then a look at PostgreSQL) when idle."""
    idle_periods = 0
    queue = subscription.queue
    idle = _IdleTimer(queue)
    try:
        while not cursor.done:
            items = [await queue.get()]
            while not queue.empty():
                items.append(queue.get_nowait())
            if all(item is _IDLE for item in items):
                # Idle: now and then look in PostgreSQL for an event Redis never got (it was
                # briefly down when the event was emitted).
                idle_periods += 1
                if idle_periods % _IDLE_PERIODS_PER_CHECK == 0:
                    seen_before = cursor.last_seen
                    async for batch in _replay(cursor):
                        yield batch
                    if cursor.last_seen != seen_before:
                        continue
                yield []
                continue
            idle.busy()
            idle_periods = 0
            pending: list[Event] = []
            for item in items:
                if cursor.done:
                    break
                if item is RESET:
                    async for replayed in _replay(cursor):
                        pending += replayed
                elif item is not _IDLE:
                    async for taken in _live_entries(item, cursor):
                        pending += taken
            if pending:
                yield pending
            del pending, items
    finally:
        idle.cancel()


# Queued to a live stream that has had nothing for AGENT_SSE_KEEPALIVE_SECONDS.
_IDLE = object()


class _IdleTimer:
    """Tells a live stream that it has been idle for ``AGENT_SSE_KEEPALIVE_SECONDS`` (an
    ``_IDLE`` in its queue), with one timer a period: a stream that is busy only notes the
    time of its last batch (a timeout around each wait, a timer made and cancelled a token,
    was a twentieth of daphne's CPU with tokens 20 ms apart)."""

    def __init__(self, queue: "asyncio.Queue[object]") -> None:
        self._queue = queue
        self._loop = asyncio.get_running_loop()
        self._period = settings.AGENT_SSE_KEEPALIVE_SECONDS
        self._last = self._loop.time()
        self._timer = self._loop.call_at(self._last + self._period, self._due)

    def busy(self) -> None:
        self._last = self._loop.time()

    def cancel(self) -> None:
        self._timer.cancel()

    def _due(self) -> None:
        now = self._loop.time()
        if not self._queue.empty():
            self._last = now  # what waits for the stream is not idleness
        # (A timer may run a hair before its time.)
        elif now - self._last >= self._period - 0.001:
            self._queue.put_nowait(_IDLE)
            self._last = now
        self._timer = self._loop.call_at(self._last + self._period, self._due)


async def _live_entries(entries: list[StoredEntry], cursor: _Cursor) -> AsyncIterator[list[Event]]:
    """The events of one read of the hub (entries of one thread's stream, each a batch of
    one run's events), with what Redis missed filled in from PostgreSQL."""
    batch: list[Event] = []
    for entry in entries:
        if entry.ids[-1] <= cursor.last_seen:
            continue  # already replayed
        # An entry written before entries carried ``seq`` (a worker of the previous
        # release) is read from PostgreSQL instead, like a gap.
        if entry.prev > cursor.last_seen or entry.events is None:
            if batch:
                yield batch
                batch = []
            async for replayed in _replay(cursor):  # Redis missed events: fill the gap
                yield replayed
            if cursor.done or entry.ids[-1] <= cursor.last_seen:
                continue
        assert entry.events is not None  # a gap's replay reads everything committed
        for event in entry.events:
            if event.id > cursor.last_seen:
                cursor.take(batch, event)
                if cursor.done:
                    break
        if cursor.done:
            break
    if batch:
        yield batch
