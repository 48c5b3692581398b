"""A run's model calls recorded off the way to its first token (``RunUsage.store_soon``,
``store_later``): the router's once the worker's first events are out, or a moment after
the boundary; a recording that comes meanwhile waits for the one under way; none after
the job's end has recorded what was left."""

import asyncio
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
from agent_runs.models import Message, Stage
from agent_runs.runtime import turn as turn_module
from agent_runs.runtime.agentscope_events import RunMappingState
from agent_runs.runtime.async_bridge import run_coroutine
from agent_runs.runtime.chat_models import ModelCall, UsageLog
from agent_runs.runtime.host import db_retried
from agent_runs.runtime.turn import RunTurn
from agent_runs.runtime.usage import RunUsage
from billing.models import UsageRecord
from tests.agent_runs.events.test_emitter_on_loop import claimed_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

_MODEL = "deepseek/deepseek-chat"


@pytest.fixture(autouse=True)
def _loop_connection_closed() -> Iterator[None]:
    yield
    run_coroutine(close_event_connection())  # as the worker does when it stops


def _router_call_kept(usage: RunUsage) -> None:
    log = UsageLog(stage=Stage.ROUTER)
    log.calls.append(ModelCall(_MODEL, {"input_tokens": 10, "output_tokens": 2}, {}))
    usage.keep(log)


def _records() -> list[str]:
    return list(UsageRecord.objects.values_list("stage", flat=True))


def test_the_router_s_call_is_recorded_once_the_worker_s_first_events_are_out(
    alice, redis_queue, monkeypatch
):
    run, emitter, _ = claimed_run(alice)
    usage = RunUsage(run=run)
    turn = RunTurn(
        run=run,
        emitter=emitter,
        user_message=Message.objects.get(run=run),
        memory_notes="",
        usage=usage,
    )
    ids = {"thread_id": str(run.thread_id), "run_id": run.run_id}

    def one_event_a_chunk(item: Any, state: RunMappingState) -> list[BaseEvent]:
        return [TextMessageContentEvent(message_id="m", delta=item, **ids)] if item else []

    monkeypatch.setattr(turn_module, "map_agentscope_event", one_event_a_chunk)
    # Whether a recording was under way as each chunk was read.
    recording: list[bool] = []

    async def chunks() -> AsyncIterator[Any]:
        for item in ("", "", "t0 ", "t1 ", "t2 "):
            recording.append(usage._soon is not None)
            yield item

    async def relay() -> None:
        emitter.emit(RunStartedEvent(**ids))
        emitter.emit(TextMessageStartEvent(message_id="m", role="assistant", **ids))
        await emitter.flush_async()
        _router_call_kept(usage)
        state = turn.mapping_state(Stage.WORKER)
        await turn.relay_reply(chunks(), state, UsageLog(stage=Stage.WORKER))
        assert usage._soon is not None
        await usage._soon
        await emitter.flush_async()

    run_coroutine(relay())

    # Not before the reply's first events (the third chunk's), and then without a wait.
    assert recording == [False, False, False, True, True]
    assert _records() == ["router"]
    assert usage.recorded_calls == 1 and not usage.unrecorded


def test_a_call_is_recorded_a_moment_after_its_boundary_when_no_events_come(alice, redis_queue):
    run, _, _ = claimed_run(alice)
    usage = RunUsage(run=run)

    async def boundary_then_a_slow_model() -> list[int]:
        _router_call_kept(usage)
        usage.store_later()
        seen = [usage.recorded_calls]
        await asyncio.sleep(0.5)  # the next stage's model says nothing yet
        seen.append(usage.recorded_calls)
        await usage.settle()
        return seen

    assert run_coroutine(boundary_then_a_slow_model()) == [0, 1]
    assert _records() == ["router"]


def test_a_recording_meanwhile_waits_and_none_comes_after_the_job_s_end(alice, redis_queue):
    run, _, _ = claimed_run(alice)
    usage = RunUsage(run=run)

    async def job() -> None:
        _router_call_kept(usage)
        usage.store_soon()
        soon = usage._soon
        usage.store_soon()  # one under way already: no second trip
        assert usage._soon is soon is not None
        # A write's recording meanwhile: one of the two records the call, once.
        recorded_meanwhile = await db_retried(usage.store_kept)
        assert recorded_meanwhile + await soon == 1
        await usage.settle()
        _router_call_kept(usage)  # kept after the job's end: left to whoever settles
        usage.store_later()
        usage.store_soon()
        assert usage._soon is None
        await asyncio.sleep(0.2)

    run_coroutine(job())
    assert _records() == ["router"]
    assert usage.recorded_calls == 1
