"""Events held for a statement the job does not wait for (``RunEventEmitter.hold_ahead``):
a boundary's steps and events written on a database thread while the next stage already
runs. What the stage emits meanwhile is written only once the boundary's events are, after
them and numbered after them; when the statement leaves the next stage's ``STEP_STARTED``
out (the run parks) or fails, what came after is dropped and the journal goes on as if
none of it had been emitted."""

import asyncio
import threading
import uuid
from collections.abc import Iterator

import pytest
from ag_ui.core import (
    CustomEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
)

from agent_runs.db import db_call
from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.emitter import RunEventEmitter
from agent_runs.events.store import stream_key
from agent_runs.events.writer import close_event_connection
from agent_runs.models import Run, RunEvent
from agent_runs.runtime.async_bridge import bridge_loop, run_coroutine
from agent_runs.services.run_claim import run_claim
from agent_runs.services.steps import (
    StepBegin,
    StepEnd,
    agent_step_advance_journaled,
    agent_step_start,
)
from tests.conftest import post_run, run_input

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture(autouse=True)
def _loop_connection_closed() -> Iterator[None]:
    yield
    run_coroutine(close_event_connection())


def _router_ran(client) -> tuple[Run, uuid.UUID, RunEventEmitter, dict[str, str]]:
    """A claimed run whose router's step started and was announced, its job's emitter on
    the test's loop."""
    body = run_input()
    post_run(client, body)
    run = Run.objects.get(run_id=body["runId"])
    token = run_claim(run_pk=run.pk)
    assert token is not None
    agent_step_start(run=run, claim_token=token, stage="router", input="hi")
    emitter = RunEventEmitter(run=run, claim_token=token, loop=bridge_loop())
    ids = {"threadId": str(run.thread_id), "runId": run.run_id}
    emitter.emit(RunStartedEvent(thread_id=ids["threadId"], run_id=ids["runId"]))
    emitter.emit(StepStartedEvent(step_name="router", **ids))
    run_coroutine(emitter.flush_async())
    return run, token, emitter, ids


def _boundary(
    run: Run, token: uuid.UUID, emitter: RunEventEmitter, ids: dict[str, str], go: threading.Event
) -> "asyncio.Future[bool]":
    """The router's boundary held ahead and its statement on a database thread, which waits
    for ``go`` first (a slow statement)."""
    held = emitter.hold_ahead(
        [StepFinishedEvent(step_name="router", **ids), StepStartedEvent(step_name="worker", **ids)],
        last_optional=True,
    )

    def statement() -> bool:
        assert go.wait(timeout=10)
        _control, begun, written = agent_step_advance_journaled(
            run=run,
            claim_token=token,
            ended=StepEnd(stage="router", output={}, additional_output={}, is_last=False),
            done=1,
            then=StepBegin(stage="worker", input="hi"),
            events=held,
        )
        emitter.ahead_written(held, written)
        return begun

    return asyncio.ensure_future(db_call(statement))


def _journal(run: Run) -> list[tuple[int, str]]:
    return list(RunEvent.objects.filter(run=run).order_by("id").values_list("seq", "type"))


def _stored_types(run: Run) -> list[str]:
    return list(RunEvent.objects.filter(run=run).order_by("id").values_list("type", flat=True))


def test_what_the_next_stage_emits_waits_for_the_boundary_and_follows_it(alice, redis_queue):
    run, token, emitter, ids = _router_ran(alice)
    go = threading.Event()

    async def stage() -> tuple[list[str], bool]:
        boundary = _boundary(run, token, emitter, ids, go)
        # The worker's first events, while the boundary's statement has not run.
        emitter.emit(TextMessageStartEvent(message_id="m", role="assistant", **ids))
        emitter.emit(TextMessageContentEvent(message_id="m", delta="Hello", **ids))
        await asyncio.sleep(0.2)  # the journal writer had every chance to write them
        before = await db_call(_stored_types, run)
        go.set()
        await boundary
        settled = emitter.ahead_settled()
        await emitter.flush_async()
        return before, settled

    before, settled = run_coroutine(stage())

    assert before == ["RUN_STARTED", "STEP_STARTED"]  # held back
    assert settled
    assert _journal(run) == [
        (0, "RUN_STARTED"),
        (1, "STEP_STARTED"),
        (2, "STEP_FINISHED"),
        (3, "STEP_STARTED"),
        (4, "TEXT_MESSAGE_START"),
        (5, "TEXT_MESSAGE_CONTENT"),
    ]
    # Published in the journal's order, each entry chained to the one before.
    entries = redis_queue.connection.xrange(stream_key(run.thread_id))
    published = [int(i) for _id, fields in entries for i in fields[b"ids"].split(b",")]
    assert published == list(
        RunEvent.objects.filter(run=run).order_by("id").values_list("id", flat=True)
    )
    assert emitter.next_seq == 6


def test_a_run_parked_at_the_boundary_drops_what_the_next_stage_emitted(alice, redis_queue):
    run, token, emitter, ids = _router_ran(alice)
    Run.objects.filter(pk=run.pk).update(pause_requested=True)
    go = threading.Event()
    go.set()

    async def stage() -> tuple[bool, bool]:
        boundary = _boundary(run, token, emitter, ids, go)
        emitter.emit(TextMessageStartEvent(message_id="m", role="assistant", **ids))
        begun = await boundary
        settled = emitter.ahead_settled()
        # The run parks: its journal says so next.
        emitter.emit(CustomEvent(name="run_paused", value={"next_stage": "worker"}))
        await emitter.flush_async()
        return begun, settled

    begun, settled = run_coroutine(stage())

    assert not begun and not settled
    assert _journal(run) == [
        (0, "RUN_STARTED"),
        (1, "STEP_STARTED"),
        (2, "STEP_FINISHED"),
        (3, "CUSTOM"),
    ]
    # The worker's STEP_STARTED was left out as if never emitted: it may come later.
    run_coroutine(_emit_flushed(emitter, StepStartedEvent(step_name="worker", **ids)))
    assert _journal(run)[-1] == (4, "STEP_STARTED")


async def _emit_flushed(emitter: RunEventEmitter, event: object) -> None:
    emitter.emit(event)  # type: ignore[arg-type]
    await emitter.flush_async()


def test_a_boundary_that_failed_drops_its_events_and_what_came_after(alice, redis_queue):
    run, _token, emitter, ids = _router_ran(alice)
    go = threading.Event()
    go.set()

    async def stage() -> bool:
        boundary = _boundary(run, uuid.uuid4(), emitter, ids, go)  # not the job's claim
        emitter.emit(TextMessageStartEvent(message_id="m", role="assistant", **ids))
        with pytest.raises(RunNoLongerRunning):
            await boundary
        return emitter.ahead_settled()

    assert not run_coroutine(stage())

    assert _journal(run) == [(0, "RUN_STARTED"), (1, "STEP_STARTED")]
    assert not emitter.writing and emitter.next_seq == 2
    # As if the boundary's events were never emitted: the router's step may end again.
    run_coroutine(_emit_flushed(emitter, StepFinishedEvent(step_name="router", **ids)))
    assert _journal(run)[-1] == (2, "STEP_FINISHED")
