"""One Redis reader per process for every open event stream.

Each SSE connection used to hold a Redis connection of its own, blocked in XREAD. The hub
instead reads all followed threads' streams with one blocking XREAD on one connection and
hands each entry to the subscribers of its thread. A subscription that is new to the hub
wakes the blocked read through a private wake stream, so it is read from at once.

A subscriber whose queue overflows, or every subscriber when Redis fails, gets ``RESET``:
it then catches up from PostgreSQL (the truth), and carries on with the live entries.

Each entry is decoded once (``codec.stored_entry_read``), and its events are handed to every
subscriber of its thread: a stream that frames them as stored sends their text as it is,
a protocol that translates them reads their shared payloads.

The blocking read names every followed stream, each time: the hub sends it on a connection
of its own, as Redis's wire format, the keys' part made once per change of the streams
followed (redis-py encoded each of the hundred-odd arguments again per read: about a sixth
of daphne's CPU with 64 streams open), and reads the reply as it is.
"""

import asyncio
import logging
import uuid
from typing import Any

import redis.asyncio as aioredis
from django.conf import settings
from redis.exceptions import RedisError

from agent_runs.events.codec import StoredEntry, stored_entry_read

logger = logging.getLogger(__name__)

HUB_CLIENT_NAME = "agent-sse-hub"
RESET = object()  # queued to a subscriber that must catch up from PostgreSQL
_QUEUE_LIMIT = 10_000
_BATCH = 500
_BLOCK_MS = 5_000
_RETRY_SECONDS = 1.0


class Subscription:
    def __init__(self, hub: "StreamHub", key: str) -> None:
        self.hub = hub
        self.key = key
        self.queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=_QUEUE_LIMIT)

    def deliver(self, item: Any) -> None:
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            # A client that reads too slowly: drop what is queued and let it catch up from
            # PostgreSQL; the entries' ``prev`` ids would show the gap anyway.
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(RESET)

    def close(self) -> None:
        self.hub.unsubscribe(self)


class StreamHub:
    def __init__(self) -> None:
        self.subscribers: dict[str, set[Subscription]] = {}
        # Each followed stream's last entry read (Redis's id, as Redis sends it).
        self.positions: dict[str, bytes] = {}
        # The read's keys and its command up to their ids, for the streams followed now.
        self._command_keys: tuple[list[str], bytes] | None = None
        self.wake_key = f"agent:sse-hub:{uuid.uuid4().hex}:wake"
        self.client = aioredis.Redis.from_url(
            settings.REDIS_URL,
            client_name=HUB_CLIENT_NAME,
            # Longer than the blocking read, which would otherwise count as a failure.
            socket_timeout=_BLOCK_MS / 1000 + 10,
        )
        self.task: asyncio.Task[None] | None = None
        # The event loop keeps only weak references to tasks: hold the wake-ups here.
        self.wake_tasks: set[asyncio.Task[None]] = set()

    async def subscribe(self, key: str) -> Subscription:
        """Start receiving the stream's new entries. Call before replaying from PostgreSQL:
        an entry added after this call reaches the subscription.

        The subscription is added with the stream's position, nothing awaited in between:
        an entry the reader takes after the position is the subscription's, even one taken
        while the read is being woken (it used to go to nobody then)."""
        subscription = Subscription(self, key)
        new_stream = False
        if key not in self.positions:
            end = await self._stream_end(key)
            if key not in self.positions:  # nobody subscribed to it meanwhile
                self.positions[key] = end
                self.subscribers[key] = set()
                self._command_keys = None
                new_stream = True
        self.subscribers[key].add(subscription)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._read())
        elif new_stream:
            self._wake_soon()  # the blocked read names the stream from its next read on
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        subscribers = self.subscribers.get(subscription.key)
        if subscribers is None:
            return
        subscribers.discard(subscription)
        if not subscribers:
            del self.subscribers[subscription.key]
            self.positions.pop(subscription.key, None)
            self._command_keys = None
            # While other streams are followed, the blocked read may keep naming this one:
            # what it brings for it is dropped, and the next read leaves it out (a wake per
            # stream closed was a round trip and a new read, every run). The last stream
            # closed wakes it, so the hub stops reading and its connection is free.
            if not self.subscribers:
                self._wake_soon()

    async def _read(self) -> None:
        wake_position = b"$"
        pool = self.client.connection_pool
        connection: Any = None
        try:
            while self.subscribers:
                try:
                    if connection is None:
                        connection = await pool.get_connection()
                    await connection.send_packed_command(
                        self._command(wake_position), check_health=False
                    )
                    # The client's socket timeout, longer than the block: a read that
                    # outlives it fails and its connection is dropped (redis-py drops one
                    # whose command is cut short, a cancel included).
                    result: Any = await connection.read_response()
                except (RedisError, OSError):
                    logger.warning(
                        "Redis read failed; streams catch up from PostgreSQL", exc_info=True
                    )
                    if connection is not None:
                        await connection.disconnect()
                        await pool.release(connection)
                        connection = None
                    await self._reset_all()
                    wake_position = b"$"
                    continue
                # A RESP3 connection answers a map; RESP2 (the default), pairs in a list.
                streams = result.items() if isinstance(result, dict) else result or ()
                for raw_key, entries in streams:
                    key = raw_key.decode()
                    if key == self.wake_key:
                        wake_position = entries[-1][0]
                        continue
                    if key not in self.positions:
                        continue  # its last subscriber left while we were reading
                    self.positions[key] = entries[-1][0]
                    delivery = _entries_read(key, entries)
                    for subscription in list(self.subscribers.get(key, ())):
                        subscription.deliver(delivery)
        finally:
            if connection is not None:
                await pool.release(connection)

    def _command(self, wake_position: bytes) -> list[bytes]:
        """``XREAD COUNT _BATCH BLOCK _BLOCK_MS STREAMS <keys> <ids>`` in Redis's wire
        format: the part up to the ids made again only when the streams followed change."""
        if self._command_keys is None:
            keys = list(self.positions)
            arguments = [
                b"XREAD",
                b"COUNT",
                str(_BATCH).encode(),
                b"BLOCK",
                str(_BLOCK_MS).encode(),
                b"STREAMS",
                *(key.encode() for key in keys),
                self.wake_key.encode(),
            ]
            head = b"*%d\r\n" % (len(arguments) + len(keys) + 1)
            self._command_keys = keys, head + b"".join(map(_bulk, arguments))
        keys, prefix = self._command_keys
        ids = [self.positions[key] for key in keys]
        ids.append(wake_position)
        return [prefix, b"".join(map(_bulk, ids))]

    async def _reset_all(self) -> None:
        for subscribers in self.subscribers.values():
            for subscription in subscribers:
                subscription.deliver(RESET)
        await asyncio.sleep(_RETRY_SECONDS)
        for key in list(self.positions):
            end = await self._stream_end(key)
            if key in self.positions:  # its last subscriber may have left meanwhile
                self.positions[key] = end

    async def _stream_end(self, key: str) -> bytes:
        """The id of the stream's last entry ("0-0" when there is none, or Redis is down):
        reading after it yields only new entries."""
        try:
            last: Any = await self.client.xrevrange(key, count=1)
        except RedisError:
            return b"0-0"
        return last[0][0] if last else b"0-0"

    def _wake_soon(self) -> None:
        """Wake the blocked read, without waiting for it (the caller has nothing to await
        it for, and a subscriber cancelled meanwhile would be left half added)."""
        wake = asyncio.get_running_loop().create_task(self._wake())
        self.wake_tasks.add(wake)
        wake.add_done_callback(self.wake_tasks.discard)

    async def _wake(self) -> None:
        if self.task is None or self.task.done():
            return
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.xadd(self.wake_key, {"w": 1}, maxlen=10)
                pipe.expire(self.wake_key, 3600)
                await pipe.execute()
        except RedisError:
            pass  # the read loop is failing too, and will reset


def _bulk(argument: bytes) -> bytes:
    """One argument of a command in Redis's wire format (a bulk string)."""
    return b"$%d\r\n%s\r\n" % (len(argument), argument)


def _entries_read(key: str, entries: list[Any]) -> list[StoredEntry] | object:
    """A read's entries of one stream (each its id and its fields and values in turn),
    decoded; ``RESET`` for one that cannot be (its subscribers then read PostgreSQL)."""
    try:
        return [
            stored_entry_read(dict(zip(fields[::2], fields[1::2], strict=True)))
            for _entry_id, fields in entries
        ]
    except (AttributeError, KeyError, TypeError, ValueError):
        logger.warning(
            "unreadable entry in %s; streams catch up from PostgreSQL", key, exc_info=True
        )
        return RESET


_hubs: dict[asyncio.AbstractEventLoop, StreamHub] = {}


def stream_hub() -> StreamHub:
    """The hub of the running event loop (daphne runs one loop per process)."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        for stale in [other for other in _hubs if other.is_closed()]:
            del _hubs[stale]
        hub = _hubs[loop] = StreamHub()
    return hub
