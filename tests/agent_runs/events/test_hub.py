"""The stream hub's blocking read (agent_runs/events/hub.py): sent as Redis's wire format on
a connection of its own, which goes back to the pool clean however the read ends."""

import asyncio
import uuid
from collections.abc import Awaitable
from typing import cast

import pytest
import redis

from agent_runs.events.hub import StreamHub


@pytest.fixture
def keys(settings):
    names = [f"test:hub:{uuid.uuid4().hex}:{n}" for n in range(2)]
    yield names
    redis.Redis.from_url(settings.REDIS_URL).delete(*names)


def test_entries_reach_their_streams_subscribers_only(keys, settings):
    writer = redis.Redis.from_url(settings.REDIS_URL)

    async def follow() -> tuple[list[int], list[int], bool]:
        hub = StreamHub()
        first, second = [await hub.subscribe(key) for key in keys]
        await asyncio.sleep(0.05)  # the read is blocked on both streams
        writer.xadd(keys[0], {"ids": "1,2", "prev": "0"})
        writer.xadd(keys[1], {"ids": "3", "prev": "0"})
        writer.xadd(keys[0], {"ids": "4", "prev": "2"})
        got_first: list[int] = []
        while len(got_first) < 3:
            entries = await asyncio.wait_for(first.queue.get(), 2)
            got_first += [event_id for entry in entries for event_id in entry.ids]
        entries = await asyncio.wait_for(second.queue.get(), 2)
        first.close()
        second.close()
        await asyncio.sleep(0.05)
        assert hub.task is not None
        stopped = hub.task.done()  # the last subscriber gone, the hub stops reading
        await hub.client.aclose()
        return got_first, [event_id for entry in entries for event_id in entry.ids], stopped

    got_first, got_second, stopped = asyncio.run(follow())
    assert got_first == [1, 2, 4]
    assert got_second == [3]
    assert stopped


def test_a_read_stopped_midway_leaves_no_reply_for_the_pools_next_command(keys):
    async def stop_mid_read() -> bool:
        hub = StreamHub()
        await hub.subscribe(keys[0])
        await asyncio.sleep(0.05)  # blocked in XREAD for up to 5 s
        assert hub.task is not None
        hub.task.cancel()
        await asyncio.gather(hub.task, return_exceptions=True)
        # The pool's next command gets its own reply at once, not the read's, 5 s on.
        pong = await asyncio.wait_for(cast(Awaitable[bool], hub.client.ping()), 1)
        await hub.client.aclose()
        return bool(pong)

    assert asyncio.run(stop_mid_read())


class _SlowWakeHub(StreamHub):
    """A hub whose wake-up is slow: before it ends, an entry is added to the stream just
    subscribed to, and the reader, woken, has read it (what a busy process may do between
    a subscription's steps)."""

    def __init__(self, key: str, writer: redis.Redis) -> None:
        super().__init__()
        self.key = key
        self.writer = writer

    async def _wake(self) -> None:
        position = self.positions.get(self.key)
        if position is None:
            await super()._wake()
            return
        self.writer.xadd(self.key, {"ids": "7", "prev": "6"})
        await super()._wake()
        async with asyncio.timeout(2):
            while self.positions.get(self.key) == position:
                await asyncio.sleep(0.001)


def test_an_entry_read_while_a_subscription_is_added_reaches_it(keys, settings):
    writer = redis.Redis.from_url(settings.REDIS_URL)
    writer.xadd(keys[1], {"ids": "6", "prev": "5"})  # before the subscription: not its

    async def subscribe_while_read() -> list[int]:
        hub = _SlowWakeHub(keys[1], writer)
        other = await hub.subscribe(keys[0])  # the reader runs, blocked on another stream
        await asyncio.sleep(0.05)
        subscription = await hub.subscribe(keys[1])
        try:
            entries = await asyncio.wait_for(subscription.queue.get(), 2)
        finally:
            subscription.close()
            other.close()
            await asyncio.sleep(0.05)
            await hub.client.aclose()
        return [event_id for entry in entries for event_id in entry.ids]

    assert asyncio.run(subscribe_while_read()) == [7]


class _BusyWakeHub(StreamHub):
    """A hub whose wake-up is slow: before it ends, another stream of the same thread opens
    and closes (a client that came and went)."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self.visited = False

    async def _wake(self) -> None:
        if self.key in self.positions and not self.visited:
            self.visited = True
            (await self.subscribe(self.key)).close()
        await super()._wake()


def test_a_stream_that_opens_and_closes_while_another_subscribes_leaves_it_subscribed(keys):
    async def subscribe_while_another_comes_and_goes() -> tuple[bool, bool]:
        hub = _BusyWakeHub(keys[1])
        other = await hub.subscribe(keys[0])  # the reader runs, blocked on another stream
        await asyncio.sleep(0.05)
        try:
            subscription = await hub.subscribe(keys[1])  # it used to fail with a KeyError
            await asyncio.sleep(0.05)
            followed = subscription in hub.subscribers.get(keys[1], ())
            subscription.close()
        finally:
            other.close()
            await asyncio.sleep(0.05)
            await hub.client.aclose()
        return hub.visited, followed

    assert asyncio.run(subscribe_while_another_comes_and_goes()) == (True, True)


def test_a_stream_left_while_the_hub_resets_is_not_followed_again(keys, monkeypatch):
    """After a failed read the hub looks up where each followed stream ends: a stream whose
    last subscriber left meanwhile is not taken back (a later subscriber would have found
    it followed by nobody)."""
    monkeypatch.setattr("agent_runs.events.hub._RETRY_SECONDS", 0)

    async def reset_while_leaving() -> tuple[bool, bool]:
        hub = StreamHub()
        subscription = await hub.subscribe(keys[0])
        looking = asyncio.Event()
        stream_end = hub._stream_end

        async def looked_up(key: str) -> bytes:
            looking.set()
            return await stream_end(key)

        hub._stream_end = looked_up  # type: ignore[method-assign]
        reset = asyncio.create_task(hub._reset_all())
        await looking.wait()
        subscription.close()  # its last subscriber leaves while the hub looks it up
        await reset
        followed = keys[0] in hub.positions
        again = await hub.subscribe(keys[0])
        subscribed = again in hub.subscribers[keys[0]]
        again.close()
        await asyncio.sleep(0.05)
        await hub.client.aclose()
        return followed, subscribed

    assert asyncio.run(reset_while_leaving()) == (False, True)
