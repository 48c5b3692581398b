"""A job's emitter writes as it goes, through its loop's journal writer
(agent_runs/events/emitter.py, ``loop``): events are in PostgreSQL and on the Redis stream
while the reply is still running, in order, numbered in their run, many runs' in one
statement; the terminal event is the caller's to write; a write under a lost claim stops
that run's job at its next emit, and no other run's."""

import asyncio
from collections.abc import Iterator

import pytest
from ag_ui.core import (
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from django.db import transaction

from agent_runs.db import db_call
from agent_runs.errors import RunNoLongerRunning
from agent_runs.events import emitter as event_log
from agent_runs.events.emitter import RunEventEmitter
from agent_runs.events.writer import close_event_connection
from agent_runs.models import Run, RunEvent
from agent_runs.runtime.async_bridge import bridge_loop, run_coroutine
from agent_runs.services.lifecycle import run_complete
from agent_runs.services.run_claim import run_claim
from tests.conftest import post_run, run_input

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture(autouse=True)
def _loop_connection_closed() -> Iterator[None]:
    yield
    run_coroutine(close_event_connection())  # as the worker does when it stops


def claimed_run(client) -> tuple[Run, RunEventEmitter, dict[str, str]]:
    body = run_input()
    post_run(client, body)
    run = Run.objects.get(run_id=body["runId"])
    token = run_claim(run_pk=run.pk)
    assert token is not None
    emitter = RunEventEmitter(run=run, claim_token=token, loop=bridge_loop())
    return run, emitter, {"threadId": str(run.thread_id), "runId": run.run_id}


async def written(emitter: RunEventEmitter) -> None:
    """Let the loop turn until the writes in flight are done (as a reply does)."""
    while emitter.writing:
        await asyncio.sleep(0.001)


def test_events_are_stored_and_published_while_the_reply_runs(alice, redis_queue):
    run, emitter, ids = claimed_run(alice)
    emitter.emit(RunStartedEvent(thread_id=ids["threadId"], run_id=ids["runId"]))
    emitter.emit(StepStartedEvent(step_name="worker", **ids))

    async def reply() -> None:
        emitter.emit(TextMessageStartEvent(message_id="m", role="assistant", **ids))
        for index in range(300):
            emitter.emit(TextMessageContentEvent(message_id="m", delta=f"t{index} ", **ids))
            if index % 50 == 0:
                await asyncio.sleep(0)  # a model's chunks come in bursts
        await written(emitter)

    run_coroutine(reply())

    # Written before any flush: the reply's events reached PostgreSQL as it ran.
    stored = list(RunEvent.objects.filter(run=run).order_by("id").values_list("seq", "type"))
    assert [seq for seq, _type in stored] == list(range(303))
    assert stored[0][1] == "RUN_STARTED" and stored[-1][1] == "TEXT_MESSAGE_CONTENT"
    entries = redis_queue.connection.xrange(event_log.stream_key(ids["threadId"]))
    published = [int(i) for _id, fields in entries for i in fields[b"ids"].split(b",")]
    assert published == list(
        RunEvent.objects.filter(run=run).order_by("id").values_list("id", flat=True)
    )
    assert len(entries) < 303  # batched: whatever came during a write went in the next

    emitter.emit(TextMessageEndEvent(message_id="m", **ids))
    emitter.emit(StepFinishedEvent(step_name="worker", **ids))
    with pytest.raises(RuntimeError):  # the terminal event comes after everything before it
        emitter.emit(RunFinishedEvent(thread_id=ids["threadId"], run_id=ids["runId"]))
    run_coroutine(emitter.flush_async())
    with transaction.atomic():  # the terminal event shares the caller's transaction
        emitter.emit(RunFinishedEvent(thread_id=ids["threadId"], run_id=ids["runId"]))
        assert emitter.claim_token is not None
        assert run_complete(run=run, claim_token=emitter.claim_token)
    types = list(RunEvent.objects.filter(run=run).order_by("id").values_list("type", flat=True))
    assert types[-3:] == ["TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"]
    assert list(
        RunEvent.objects.filter(run=run).order_by("id").values_list("seq", flat=True)
    ) == list(range(306))


def test_a_lost_claim_stops_the_reply_at_its_next_emit_and_nothing_more_is_stored(
    alice, redis_queue
):
    run, emitter, ids = claimed_run(alice)
    emitter.emit(RunStartedEvent(thread_id=ids["threadId"], run_id=ids["runId"]))
    run_coroutine(emitter.flush_async())
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)  # a cancel came

    async def reply() -> None:
        emitter.emit(StepStartedEvent(step_name="worker", **ids))
        await written(emitter)
        emitter.emit(StepFinishedEvent(step_name="worker", **ids))

    with pytest.raises(RunNoLongerRunning):
        run_coroutine(reply())
    with pytest.raises(RunNoLongerRunning):
        run_coroutine(emitter.flush_async())
    assert list(RunEvent.objects.filter(run=run).values_list("type", flat=True)) == ["RUN_STARTED"]


def test_many_runs_events_share_statements_and_a_lost_claim_stops_only_its_run(alice, redis_queue):
    runs = [claimed_run(alice) for _ in range(4)]
    lost_run, lost, _ = runs[0]
    Run.objects.filter(pk=lost_run.pk).update(status=Run.Status.CANCELLED)  # a cancel came
    statements: list[str] = []
    writer = event_log.journal_writer(bridge_loop())
    execute = writer._execute

    async def counted(sql, params):
        statements.append(sql)
        return await execute(sql, params)

    writer._execute = counted  # type: ignore[method-assign]  # counts the writer's statements

    async def replies() -> None:
        for index in range(50):
            for _run, emitter, ids in runs:
                if emitter is lost and index:
                    continue
                if index == 0:
                    emitter.emit(RunStartedEvent(thread_id=ids["threadId"], run_id=ids["runId"]))
                else:
                    emitter.emit(StepStartedEvent(step_name=f"s{index}", **ids))
            await asyncio.sleep(0)
        for _run, emitter, _ids in runs[1:]:
            await emitter.flush_async()

    run_coroutine(replies())
    with pytest.raises(RunNoLongerRunning):
        run_coroutine(lost.flush_async())
    assert not RunEvent.objects.filter(run=lost_run).exists()
    for run, _emitter, _ids in runs[1:]:
        seqs = list(RunEvent.objects.filter(run=run).order_by("id").values_list("seq", flat=True))
        assert seqs == list(range(50))
    # 150 events of three runs (and the lost run's one): far fewer statements than events,
    # most of them carrying several runs' events.
    assert len(statements) < 60


def test_after_a_shared_round_the_next_waits_its_time_unless_a_job_waits_for_it(
    alice, redis_queue, settings
):
    # Rounds a second apart once they carry several runs' events: a token would wait that
    # long for its write, but a job that waits for its events (a stage's end) does not.
    settings.AGENT_EVENTS_WRITE_INTERVAL = 1.0
    run, emitter, ids = claimed_run(alice)
    other_run, other, other_ids = claimed_run(alice)

    async def stage() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        emitter.emit(RunStartedEvent(thread_id=ids["threadId"], run_id=ids["runId"]))
        other.emit(RunStartedEvent(thread_id=other_ids["threadId"], run_id=other_ids["runId"]))
        await emitter.flush_async()  # one round for both runs
        await other.flush_async()
        emitter.emit(StepStartedEvent(step_name="worker", **ids))
        await asyncio.sleep(0.05)
        stored_before_flush = await db_call(RunEvent.objects.filter(run=run).count)
        started = loop.time()
        await emitter.flush_async()  # the round's time is a second away
        return stored_before_flush, loop.time() - started

    stored_before_flush, took = run_coroutine(stage())

    assert stored_before_flush == 1  # the second event waited for its round's time
    assert took < 0.5
    assert RunEvent.objects.filter(run=run).count() == 2
    assert RunEvent.objects.filter(run=other_run).count() == 1


def test_a_lone_runs_events_do_not_wait_for_a_rounds_time(alice, redis_queue, settings):
    settings.AGENT_EVENTS_WRITE_INTERVAL = 1.0
    run, emitter, ids = claimed_run(alice)

    async def stage() -> int:
        emitter.emit(RunStartedEvent(thread_id=ids["threadId"], run_id=ids["runId"]))
        await emitter.flush_async()  # a round of this run alone
        emitter.emit(StepStartedEvent(step_name="worker", **ids))
        await asyncio.sleep(0.2)  # no flush: the writer's own round
        return await db_call(RunEvent.objects.filter(run=run).count)

    assert run_coroutine(stage()) == 2
