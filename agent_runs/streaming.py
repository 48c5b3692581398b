"""The SSE event stream of a thread: replay from PostgreSQL, then live from Redis, no gaps.

spec/sse-events-and-usage.md, sections 1-2. The stream subscribes to the process's stream
hub before it replays, so an event committed during the replay is either replayed or read
live (and dropped the second time by id). Each live entry names the thread's previous event
id: when it is not the last one sent, Redis missed something and PostgreSQL fills the gap.
When Redis fails, or the client reads too slowly, the hub says so and PostgreSQL is read.
"""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection as db_connection

from agent_runs import selectors
from agent_runs.codec import KEEP_ALIVE_FRAME, TERMINAL_TYPES, retry_frame, sse_frame
from agent_runs.event_log import stream_key
from agent_runs.stream_hub import RESET, Subscription, stream_hub

T = TypeVar("T")

_REPLAY_PAGE = 1000
_RETRY_MS = 3000
_IDLE_PERIODS_PER_CHECK = 4


@dataclass
class _Cursor:
    thread_id: uuid.UUID
    last_sent: int
    run_id: str | None
    follow: bool
    done: bool = False

    def frame(self, event_id: int, payload: dict[str, Any]) -> bytes:
        self.last_sent = event_id
        if (
            not self.follow
            and payload.get("type") in TERMINAL_TYPES
            and payload.get("runId") == self.run_id
        ):
            self.done = True
        return sse_frame(event_id, payload)


async def thread_event_stream(
    *, thread_id: uuid.UUID, start: selectors.EventStreamStart, follow: bool
) -> AsyncIterator[bytes]:
    """SSE frames for a thread's events after ``start.after_id``, ending after the latest
    run's terminal event unless ``follow``."""
    yield retry_frame(_RETRY_MS)
    if start.run_ended and not follow:
        return
    subscription = await stream_hub().subscribe(stream_key(thread_id))  # before the replay
    try:
        cursor = _Cursor(thread_id, start.after_id, start.run_id, follow)
        async for frame in _replay(cursor):
            yield frame
        async for frame in _live(subscription, cursor):
            yield frame
    finally:
        subscription.close()


async def _replay(cursor: _Cursor) -> AsyncIterator[bytes]:
    """Every committed event after the cursor, page by page, from PostgreSQL."""
    while not cursor.done:
        rows = await db_call(
            selectors.events_after,
            thread_id=cursor.thread_id,
            after_id=cursor.last_sent,
            limit=_REPLAY_PAGE,
        )
        frames = []
        for event_id, payload in rows:
            frames.append(cursor.frame(event_id, payload))
            if cursor.done:
                break
        if frames:
            yield b"".join(frames)  # one write per page, not per event
        if cursor.done or len(rows) < _REPLAY_PAGE:
            return


async def _live(subscription: Subscription, cursor: _Cursor) -> AsyncIterator[bytes]:
    """Events as Redis receives them; keep-alives (and a look at PostgreSQL) when idle."""
    keep_alive = settings.AGENT_SSE_KEEPALIVE_SECONDS
    idle_periods = 0
    while not cursor.done:
        try:
            item = await asyncio.wait_for(subscription.queue.get(), keep_alive)
        except TimeoutError:
            # Idle: tell the client and the proxies that the stream is alive, and now and
            # then look in PostgreSQL for an event Redis never got (it was briefly down when
            # the event was emitted).
            idle_periods += 1
            if idle_periods % _IDLE_PERIODS_PER_CHECK == 0:
                sent_before = cursor.last_sent
                async for frame in _replay(cursor):
                    yield frame
                if cursor.last_sent != sent_before:
                    continue
            yield KEEP_ALIVE_FRAME
            continue
        idle_periods = 0
        if item is RESET:
            async for frame in _replay(cursor):
                yield frame
            continue
        frames: list[bytes] = []
        for _entry_id, fields in item:  # one entry: a batch of one run's events
            ids = [int(event_id) for event_id in fields[b"ids"].split(b",")]
            if ids[-1] <= cursor.last_sent:
                continue  # already replayed
            if int(fields[b"prev"]) > cursor.last_sent:
                async for frame in _replay(cursor):  # Redis missed events: fill the gap
                    frames.append(frame)
                if cursor.done or ids[-1] <= cursor.last_sent:
                    continue
            for event_id, payload in zip(ids, json.loads(fields[b"data"]), strict=True):
                if event_id > cursor.last_sent:
                    frames.append(cursor.frame(event_id, payload))
                    if cursor.done:
                        break
            if cursor.done:
                break
        if frames:
            yield b"".join(frames)  # one write per batch read, not per event


async def db_call(function: Callable[..., T], /, **kwargs: Any) -> T:
    """Run a database read from async code and give the connection back at once: a stream
    lives for minutes, and must not hold a pooled connection while it waits."""

    def call() -> T:
        try:
            return function(**kwargs)
        finally:
            db_connection.close()

    # The shared executor, not a thread of the request's own: a stream holds no thread.
    return await sync_to_async(call, thread_sensitive=False)()
