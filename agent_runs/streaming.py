"""The SSE event stream of a thread: replay from PostgreSQL, then live from Redis, no gaps.

spec/sse-events-and-usage.md, sections 1-2. The stream takes the Redis stream's end before
it replays, so an event committed during the replay is either replayed or read live (and
dropped the second time by id). Each live entry names the thread's previous event id: when it
is not the last one sent, Redis missed something and PostgreSQL fills the gap. When Redis is
down or idle, PostgreSQL is read directly.
"""

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from django.conf import settings
from redis.exceptions import RedisError

from agent_runs import selectors
from agent_runs.codec import KEEP_ALIVE_FRAME, TERMINAL_TYPES, retry_frame, sse_frame
from agent_runs.event_log import stream_key

logger = logging.getLogger(__name__)

# The name of each stream's Redis connection, to count them in CLIENT LIST.
SSE_CLIENT_NAME = "agent-sse"
_REPLAY_PAGE = 1000
_LIVE_BATCH = 500
_RETRY_MS = 3000
_REDIS_RETRY_SECONDS = 1.0


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
    *, thread_id: uuid.UUID, after_id: int | None, follow: bool
) -> AsyncIterator[bytes]:
    """SSE frames for a thread's events after ``after_id`` (or from the latest run's start),
    ending after the latest run's terminal event unless ``follow``."""
    yield retry_frame(_RETRY_MS)
    client = aioredis.Redis.from_url(settings.REDIS_URL, client_name=SSE_CLIENT_NAME)
    key = stream_key(thread_id)
    try:
        live_from: str | None = await _stream_end(client, key)  # subscribe before replaying
        start = await sync_to_async(selectors.event_stream_start)(
            thread_id=thread_id, after_id=after_id
        )
        cursor = _Cursor(thread_id, start.after_id, start.run_id, follow)
        if start.run_ended and not follow:
            return
        async for frame in _replay(cursor):
            yield frame
        while not cursor.done:
            async for frame in _live(client, key, cursor, live_from):
                yield frame
            live_from = None  # after a Redis failure, subscribe again from the end
    finally:
        await client.aclose()


async def _replay(cursor: _Cursor) -> AsyncIterator[bytes]:
    """Every committed event after the cursor, page by page, from PostgreSQL."""
    while not cursor.done:
        rows = await sync_to_async(selectors.events_after)(
            thread_id=cursor.thread_id, after_id=cursor.last_sent, limit=_REPLAY_PAGE
        )
        for event_id, payload in rows:
            yield cursor.frame(event_id, payload)
            if cursor.done:
                return
        if len(rows) < _REPLAY_PAGE:
            return


async def _live(
    client: aioredis.Redis, key: str, cursor: _Cursor, live_from: str | None
) -> AsyncIterator[bytes]:
    """Events as Redis receives them; keep-alives (and a look at PostgreSQL) when idle."""
    position = live_from or await _stream_end(client, key)
    block_ms = int(settings.AGENT_SSE_KEEPALIVE_SECONDS * 1000)
    while not cursor.done:
        try:
            entries: Any = await client.xread({key: position}, count=_LIVE_BATCH, block=block_ms)
        except RedisError:
            logger.warning("Redis read failed for %s; reading PostgreSQL", key, exc_info=True)
            async for frame in _replay(cursor):
                yield frame
            await asyncio.sleep(_REDIS_RETRY_SECONDS)
            return  # the caller subscribes again from the stream's end
        if not entries:
            # Idle: anything Redis never got (it was down when the event was emitted) is in
            # PostgreSQL; otherwise tell the client and the proxies that the stream is alive.
            sent_before = cursor.last_sent
            async for frame in _replay(cursor):
                yield frame
            if cursor.last_sent == sent_before:
                yield KEEP_ALIVE_FRAME
            continue
        for entry_id, fields in entries[0][1]:
            position = entry_id.decode()
            event_id = int(fields[b"id"])
            if event_id <= cursor.last_sent:
                continue  # already replayed
            if int(fields[b"prev"]) > cursor.last_sent:
                async for frame in _replay(cursor):  # Redis missed events: fill the gap
                    yield frame
                if cursor.done or event_id <= cursor.last_sent:
                    continue
            yield cursor.frame(event_id, json.loads(fields[b"data"]))
            if cursor.done:
                return


async def _stream_end(client: aioredis.Redis, key: str) -> str:
    """The id of the stream's last entry: reading after it yields only new entries."""
    try:
        last: Any = await client.xrevrange(key, count=1)
    except RedisError:
        return "0-0"
    return last[0][0].decode() if last else "0-0"
