"""A stage's reply relayed as AG-UI events (``RunTurn.relay_reply``): its first events,
what its reader waits for, are written and on their stream before its next chunk is read."""

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
)

from agent_runs.events.writer import close_event_connection
from agent_runs.models import Message, RunEvent, Stage
from agent_runs.runtime import turn as turn_module
from agent_runs.runtime.agentscope_events import RunMappingState
from agent_runs.runtime.async_bridge import run_coroutine
from agent_runs.runtime.chat_models import UsageLog
from agent_runs.runtime.turn import RunTurn
from agent_runs.runtime.usage import RunUsage
from tests.agent_runs.events.test_emitter_on_loop import claimed_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture(autouse=True)
def _loop_connection_closed() -> Iterator[None]:
    yield
    run_coroutine(close_event_connection())  # as the worker does when it stops


def test_a_reply_s_first_events_are_written_before_its_next_chunk_is_read(
    alice, redis_queue, monkeypatch
):
    """A fast model's chunks are all in a buffer at once: reading them while the first write
    was in flight held each step of that write back by a chunk's work."""
    run, emitter, _ = claimed_run(alice)
    turn = RunTurn(
        run=run,
        emitter=emitter,
        user_message=Message.objects.get(run=run),
        memory_notes="",
        usage=RunUsage(run=run),
    )
    ids = {"thread_id": str(run.thread_id), "run_id": run.run_id}

    def one_event_a_chunk(item: Any, state: RunMappingState) -> list[BaseEvent]:
        return [TextMessageContentEvent(message_id="m", delta=item, **ids)]

    monkeypatch.setattr(turn_module, "map_agentscope_event", one_event_a_chunk)
    # When each chunk after the first is read: whether what came before it is written.
    seen: list[tuple[int, bool]] = []

    async def chunks() -> AsyncIterator[Any]:
        for index in range(5):
            if index:
                seen.append((index, not emitter.writing))
            yield f"t{index} "

    async def relay() -> None:
        emitter.emit(RunStartedEvent(**ids))
        emitter.emit(TextMessageStartEvent(message_id="m", role="assistant", **ids))
        await emitter.flush_async()
        state = turn.mapping_state(Stage.WORKER)
        await turn.relay_reply(chunks(), state, UsageLog(stage=Stage.WORKER))
        await emitter.flush_async()

    run_coroutine(relay())

    assert seen[0] == (1, True)  # the first chunk's event was out before the second was read
    stored = RunEvent.objects.filter(run=run, type="TEXT_MESSAGE_CONTENT").order_by("id")
    assert [event.payload["delta"] for event in stored] == [f"t{index} " for index in range(5)]
