"""A thread's journal is a concatenation of whole runs, each from its RUN_STARTED to exactly
one terminal event, never interleaved; a job writes only while its run is its own.

Regression tests for what was found from outside (issue: one run core for many protocols):
the cancel splice, the mid-run stream start, the zombie job after the sweeper, the cut
database connection, the tool message's id.
"""

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from ag_ui.core import (
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
)
from django.db import connection, connections, transaction
from django.utils import timezone

from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.emitter import RunEventEmitter
from agent_runs.models import Message, Run, RunEvent, Thread
from agent_runs.services.lifecycle import run_complete, run_dispatch_next, runs_recover
from agent_runs.services.run_claim import run_claim
from agent_runs.services.threads import thread_delete
from tests.agent_runs.sse import read_sse
from tests.conftest import post_run, run_input, start_worker, stop_process, wait_for, work_burst
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}


def assert_whole_runs(payloads: list[dict[str, Any]]) -> list[str]:
    """The journal's runs in order; fails unless each is whole and none interleaves."""
    runs: list[str] = []
    current: str | None = None
    for payload in payloads:
        kind, run_id = payload["type"], str(payload.get("runId"))
        if current is None:
            assert kind == "RUN_STARTED", f"{kind} of {run_id} outside any run"
            assert run_id not in runs, f"{run_id} started twice"
            current = run_id
            runs.append(run_id)
            continue
        assert run_id == current, f"{kind} of {run_id} inside {current}"
        assert kind != "RUN_STARTED", f"a second RUN_STARTED inside {current}"
        if kind in TERMINAL:
            current = None
    assert current is None, f"{current} has no terminal event"
    return runs


def thread_journal(thread_id: str) -> list[dict[str, Any]]:
    return list(
        RunEvent.objects.filter(thread_id=thread_id)
        .order_by("id")
        .values_list("payload", flat=True)
    )


def slow_worker(model: FakeOpenAI, delay: float, **env: str) -> Any:
    model.delay = delay
    return start_worker(
        AGENT_WORKER_MODEL="openai/gpt-test",
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY="sk-test",
        **env,
    )


def cancel(client: Any, run_id: str) -> Any:
    return client.post(f"/api/v1/agent/runs/{run_id}/cancel")


def test_a_queued_runs_cancel_is_written_after_the_running_run_ends(
    alice, alice_token, redis_queue, daphne_port
):
    with FakeOpenAI() as model:
        worker = slow_worker(model, delay=1.0)
        try:
            first = run_input(runId="run-1")
            post_run(alice, first)
            thread_id = first["threadId"]
            wait_for(lambda: model.requests)  # run 1 is in its model call
            post_run(alice, run_input(threadId=thread_id, runId="run-2"))
            assert cancel(alice, "run-2").json()["status"] == "cancelled"
            wait_for(lambda: RunEvent.objects.filter(run__run_id="run-2").count() == 2)
        finally:
            stop_process(worker)

    journal = thread_journal(thread_id)
    assert assert_whole_runs(journal) == ["run-1", "run-2"]
    assert [p["type"] for p in journal if p["runId"] == "run-2"] == ["RUN_STARTED", "RUN_ERROR"]
    assert journal[-1]["code"] == "cancelled"
    assert Run.objects.get(run_id="run-1").status == Run.Status.COMPLETED
    run_2 = Run.objects.get(run_id="run-2")
    assert run_2.status == Run.Status.CANCELLED and run_2.started_at is None
    # A stream from the start delivers run 1's RUN_FINISHED, and ends with run 2's end.
    stream = read_sse(daphne_port, thread_id, token=alice_token, query={"lastEventId": "0"})
    assert stream.types.count("RUN_FINISHED") == 1
    assert [e["data"]["runId"] for e in stream.events if e["event"] in TERMINAL] == [
        "run-1",
        "run-2",
    ]


def claim_and_start(run_id: str) -> tuple[Run, RunEventEmitter]:
    """Play the job of a run by hand: claim it and emit its first events."""
    run = Run.objects.get(run_id=run_id)
    token = run_claim(run_pk=run.pk)
    assert token is not None
    emitter = RunEventEmitter(run=run, claim_token=token, batch_window=0)
    emitter.emit(RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id))
    emitter.emit(StepStartedEvent(step_name="router", **wire_ids(run)))
    return run, emitter


def wire_ids(run: Run) -> dict[str, str]:
    """The ids the pipeline puts on every event (extra fields, camelCase on the wire)."""
    return {"threadId": str(run.thread_id), "runId": run.run_id}


def test_a_stream_without_a_cursor_starts_at_the_latest_runs_start(
    alice, alice_token, redis_queue, daphne_port
):
    first = run_input(runId="run-1")
    post_run(alice, first)
    thread_id = first["threadId"]
    post_run(alice, run_input(threadId=thread_id, runId="run-2"))
    redis_queue.empty()  # the test plays run 1's job, and starts run 2's worker itself
    run_1, emitter = claim_and_start("run-1")
    results: dict[str, Any] = {}

    def read(name: str, **query: str) -> None:
        results[name] = read_sse(daphne_port, thread_id, token=alice_token, query=query)

    readers = [
        threading.Thread(target=read, args=("latest",)),  # run 2: queued, no event yet
        threading.Thread(target=read, args=("run-1",), kwargs={"runId": "run-1"}),
    ]
    for reader in readers:
        reader.start()
    time.sleep(0.5)  # both streams are open while run 1 is mid-run
    emitter.emit(StepFinishedEvent(step_name="router", **wire_ids(run_1)))
    emitter.emit(RunFinishedEvent(thread_id=str(run_1.thread_id), run_id="run-1"))
    assert emitter.claim_token is not None
    assert run_complete(run=run_1, claim_token=emitter.claim_token)
    run_dispatch_next(thread_id=run_1.thread_id)  # as run 1's job would: run 2 is next
    work_burst(redis_queue)
    for reader in readers:
        reader.join(timeout=20)

    latest, chosen = results["latest"], results["run-1"]
    assert latest.types[0] == "RUN_STARTED"
    assert {e["data"]["runId"] for e in latest.events} == {"run-2"}
    assert latest.types[-1] == "RUN_FINISHED"
    assert chosen.types == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
    assert {e["data"]["runId"] for e in chosen.events} == {"run-1"}
    stranger_run = read_sse(daphne_port, thread_id, token=alice_token, query={"runId": "nope"})
    assert stranger_run.status == 404


def test_a_write_under_a_lost_claim_is_refused_and_stores_nothing(alice, redis_queue):
    body = run_input()
    post_run(alice, body)
    run, emitter = claim_and_start(body["runId"])
    # The sweeper (or a cancel) ended the run: the job's claim no longer holds.
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)
    before = RunEvent.objects.filter(run=run).count()

    with pytest.raises(RunNoLongerRunning):
        emitter.emit(StepFinishedEvent(step_name="router", **wire_ids(run)))

    assert RunEvent.objects.filter(run=run).count() == before
    # Another claim is another job's: its writes are refused too.
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    stranger = RunEventEmitter(run=run, resume=True, claim_token=run.task_id, batch_window=0)
    with pytest.raises(RunNoLongerRunning):
        stranger.emit(StepStartedEvent(step_name="worker", **wire_ids(run)))
    assert list(RunEvent.objects.filter(run=run).values_list("seq", flat=True)) == [0, 1]


def test_a_write_of_no_claim_for_a_deleted_thread_stores_nothing_and_deleting_takes_the_journal(
    alice, redis_queue
):
    # The journal has no foreign key constraints: each write fences its batch instead. A
    # write of no claim (a web-side end) locks the thread's row as the constraint did; a
    # thread deleted meanwhile gets no rows, not orphans.
    body = run_input()
    post_run(alice, body)
    run, _emitter = claim_and_start(body["runId"])
    assert RunEvent.objects.filter(thread_id=run.thread_id).count() == 2
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)

    thread_delete(thread=run.thread)

    assert not RunEvent.objects.filter(thread_id=run.thread_id).exists()  # the ORM's cascade
    unclaimed = RunEventEmitter(run=run, claim_token=None, batch_window=0)
    with pytest.raises(RunNoLongerRunning):
        unclaimed.emit(RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id))
    assert not RunEvent.objects.filter(thread_id=run.thread_id).exists()
    assert not RunEvent.objects.filter(run_id=run.pk).exists()


def test_a_write_of_no_claim_waits_for_a_thread_being_deleted_then_stores_nothing(
    alice, redis_queue
):
    # The fence's lock is the one the constraint's check took: a deletion holding the
    # thread's row makes the write wait, and once it commits the write finds no thread.
    body = run_input()
    post_run(alice, body)
    run, _emitter = claim_and_start(body["runId"])
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    outcome: list[str] = []

    def write() -> None:
        unclaimed = RunEventEmitter(run=run, claim_token=None, batch_window=0)
        try:
            unclaimed.emit(RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id))
            outcome.append("written")
        except RunNoLongerRunning:
            outcome.append("refused")
        finally:
            connections.close_all()

    writer = threading.Thread(target=write)
    with transaction.atomic():
        locked = Thread.objects.select_for_update().get(pk=run.thread_id)
        writer.start()
        writer.join(timeout=0.5)
        assert writer.is_alive() and not outcome  # it waits for the deletion
        locked.delete()
    writer.join(timeout=10)

    assert outcome == ["refused"]
    assert not RunEvent.objects.filter(thread_id=run.thread_id).exists()


def test_the_sweeper_leaves_a_beating_run_alone_after_redis_is_flushed_and_stops_a_silent_one(
    alice, redis_queue, settings
):
    settings.AGENT_RUN_STALE_SECONDS = 3
    with FakeOpenAI() as model:
        worker = slow_worker(
            model, delay=5.0, AGENT_RUN_HEARTBEAT_SECONDS="1", AGENT_RUN_STALE_SECONDS="3"
        )
        try:
            beating = run_input(runId="beating")
            post_run(alice, beating)
            wait_for(lambda: model.requests)
            redis_queue.connection.flushdb()  # the job is gone from Redis, not the worker
            time.sleep(3.5)  # longer than a run may go without a heartbeat
            assert runs_recover() == (0, 0)
            wait_for(lambda: Run.objects.get(run_id="beating").status != Run.Status.RUNNING)
            assert Run.objects.get(run_id="beating").status == Run.Status.COMPLETED

            silent = run_input(runId="silent")
            model.requests.clear()
            post_run(alice, silent)
            wait_for(lambda: model.requests)
            # The worker looks dead (its heartbeat stopped reaching the database).
            long_ago = timezone.now() - timedelta(days=1)
            Run.objects.filter(run_id="silent").update(heartbeat_at=long_ago)
            assert runs_recover()[0] == 1
            recovered = time.monotonic()
            model.delay = 0
            after = run_input(runId="after")
            post_run(alice, after)
            wait_for(lambda: Run.objects.get(run_id="after").status == Run.Status.COMPLETED)
            # The silent run's job was stopped (its model call had seconds to go): the
            # worker ran the next run at once.
            assert time.monotonic() - recovered < 3.5
        finally:
            stop_process(worker)

    run = Run.objects.get(run_id="silent")
    assert run.status == Run.Status.FAILED
    types = list(run.events.order_by("seq").values_list("type", flat=True))
    assert types[-1] == "RUN_ERROR" and types.count("RUN_ERROR") == 1
    assert run.events.get(type="RUN_ERROR").payload["code"] == "worker_lost"
    assert not Message.objects.filter(run=run, role="assistant").exists()
    assert_whole_runs(thread_journal(silent["threadId"]))


def test_a_run_whose_database_connection_is_cut_mid_run_ends_itself(alice, redis_queue):
    with FakeOpenAI() as model:
        worker = slow_worker(model, delay=1.5, PGAPPNAME="test-worker-mid-run")
        try:
            body = run_input()
            post_run(alice, body)
            wait_for(lambda: model.requests)  # in its model call
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = 'test-worker-mid-run'"
                )
                assert cursor.fetchone()[0] >= 1
            started = time.monotonic()
            wait_for(lambda: Run.objects.get(run_id=body["runId"]).status != "running", 30)
            took = time.monotonic() - started
        finally:
            stop_process(worker)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error
    assert took < 20  # the job ended it, not the sweeper (AGENT_RUN_STALE_SECONDS: 120)
    assert assert_whole_runs(thread_journal(body["threadId"])) == [body["runId"]]
