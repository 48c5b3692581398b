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
