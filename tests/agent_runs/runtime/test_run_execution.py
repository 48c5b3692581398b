"""Runs going through a real RQ worker on PostgreSQL and Redis."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from agent_runs.models import Message, Run, RunEvent
from agent_runs.runtime.demo_model import demo_answer
from agent_runs.runtime.execution import run_start_soon
from agent_runs.runtime.host import RunHost
from agent_runs.services.queue import run_enqueue
from tests.conftest import post_run, run_input, wait_for, work_burst

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def test_a_run_goes_from_queued_to_completed_through_the_worker(alice, redis_queue):
    body = run_input(messages=[{"id": "m1", "role": "user", "content": "Hello there, agent"}])
    response = post_run(alice, body)
    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.QUEUED
    assert redis_queue.job_ids == [response.json()["taskId"]]

    work_burst(redis_queue)

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert run.started_at is not None and run.finished_at is not None
    assert run.finished_at >= run.started_at
    assistant = Message.objects.get(run=run, role=Message.Role.ASSISTANT)
    assert assistant.seq == 2
    assert assistant.content == demo_answer("Hello there, agent")
    assert assistant.metadata["run_id"] == body["runId"]
    assert assistant.metadata["stage"] == "worker"
    assert assistant.metadata["message_id"] == assistant.message_id
    assert isinstance(assistant.metadata["latency_ms"], int)


def test_runs_of_one_thread_run_one_after_the_other_in_order(alice, redis_queue):
    first = run_input(runId="run-1")
    post_run(alice, first)
    post_run(alice, run_input(threadId=first["threadId"], runId="run-2"))
    run_1, run_2 = Run.objects.order_by("pk")
    # The second run's job reaches the worker first: it must wait for the first run.
    redis_queue.empty()
    run_enqueue(run=run_2)
    run_enqueue(run=run_1)

    work_burst(redis_queue)

    run_1.refresh_from_db()
    run_2.refresh_from_db()
    assert run_1.status == run_2.status == Run.Status.COMPLETED
    assert run_2.started_at is not None and run_1.finished_at is not None
    assert run_2.started_at >= run_1.finished_at
    roles = list(Message.objects.order_by("seq").values_list("run__run_id", "role"))
    assert roles == [
        ("run-1", "user"),
        ("run-2", "user"),
        ("run-1", "assistant"),
        ("run-2", "assistant"),
    ]


def test_a_run_does_not_start_while_another_run_of_its_thread_is_running(alice, redis_queue):
    first = run_input(runId="run-1")
    post_run(alice, first)
    post_run(alice, run_input(threadId=first["threadId"], runId="run-2"))
    run_1, run_2 = Run.objects.order_by("pk")
    Run.objects.filter(pk=run_1.pk).update(status=Run.Status.RUNNING)  # another worker has it

    work_burst(redis_queue)

    run_2.refresh_from_db()
    assert run_2.status == Run.Status.QUEUED
    assert not Message.objects.filter(role=Message.Role.ASSISTANT).exists()


def test_a_run_that_fails_is_marked_failed_with_its_error_kept(alice, redis_queue):
    body = run_input()
    post_run(alice, body)
    run = Run.objects.get(run_id=body["runId"])
    # The user message is gone, so the job cannot build its prompt.
    Message.objects.filter(run=run).delete()

    work_burst(redis_queue)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "DoesNotExist" in run.error
    assert run.finished_at is not None and run.started_at is not None
    # Its opening was rolled back whole (no step begun), the run claimed alone, and the job
    # failed it after the RUN_STARTED that says so.
    assert list(run.events.order_by("seq").values_list("type", flat=True)) == [
        "RUN_STARTED",
        "RUN_ERROR",
    ]
    assert not run.steps.exists()


def test_a_run_whose_job_was_lost_with_redis_is_recovered_by_the_next_worker(alice, redis_queue):
    body = run_input()
    post_run(alice, body)
    redis_queue.connection.flushdb()  # Redis lost everything; PostgreSQL still has the run

    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error


def test_recovery_enqueues_the_next_run_of_each_idle_thread_once(alice, redis_queue):
    from agent_runs.services.lifecycle import runs_recover

    first, second = run_input(runId="a-1"), run_input(runId="b-1")
    for body in (first, run_input(threadId=first["threadId"], runId="a-2"), second):
        post_run(alice, body)
    busy = run_input(runId="c-1")
    post_run(alice, busy)
    post_run(alice, run_input(threadId=busy["threadId"], runId="c-2"))
    Run.objects.filter(run_id="c-1").update(status=Run.Status.RUNNING, started_at=timezone.now())
    redis_queue.connection.flushdb()  # Redis lost the backlog

    first_sweep = runs_recover()
    queued = sorted(Run.objects.get(task_id=job_id).run_id for job_id in redis_queue.job_ids)
    second_sweep = runs_recover()

    # c-1's job is gone too, but it started moments ago: it gets the stale grace.
    assert first_sweep == (0, 2)
    assert queued == ["a-1", "b-1"]  # a thread's oldest only; none behind a running run
    assert second_sweep == (0, 0)  # their jobs are waiting: not enqueued twice


def test_a_run_left_running_by_a_dead_worker_is_failed_by_the_next_worker(alice, redis_queue):
    body = run_input()
    post_run(alice, body)
    stale = timezone.now() - timedelta(seconds=settings.AGENT_RUN_JOB_TIMEOUT + 120)
    Run.objects.filter(run_id=body["runId"]).update(status=Run.Status.RUNNING, started_at=stale)

    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.FAILED
    assert run.error == "the worker running this run stopped"
    assert list(run.events.values_list("type", flat=True)) == ["RUN_STARTED", "RUN_ERROR"]
    assert run.events.get(type="RUN_ERROR").payload["code"] == "worker_lost"


def test_a_worker_whose_database_connection_was_cut_runs_the_next_run(alice, redis_queue):
    from django.db import connection

    from tests.conftest import start_worker, stop_process

    worker = start_worker(PGAPPNAME="test-worker-cut")  # libpq names its connections so
    try:
        post_run(alice, run_input(runId="before"))
        wait_for(lambda: Run.objects.get(run_id="before").status == Run.Status.COMPLETED)
        with connection.cursor() as cursor:  # a database restart, as the worker sees it
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'test-worker-cut'"
            )
            assert cursor.fetchone()[0] >= 1
        post_run(alice, run_input(runId="after"))
        wait_for(lambda: Run.objects.get(run_id="after").status != Run.Status.QUEUED)
        wait_for(lambda: Run.objects.get(run_id="after").status != Run.Status.RUNNING)
    finally:
        stop_process(worker)

    after = Run.objects.get(run_id="after")
    assert after.status == Run.Status.COMPLETED, after.error


def test_a_runs_claim_begins_on_a_database_thread_without_waiting_for_the_loop(alice, redis_queue):
    """``run_start_soon``: what RQ's loop starts as it hands a run's job on; the run is
    claimed and opened on a database thread though the host's loop never runs a task."""
    body = run_input()
    post_run(alice, body)
    run = Run.objects.get(run_id=body["runId"])
    host = RunHost(concurrency=1, db_threads=1)  # its loop is never started
    try:
        started = run_start_soon(run.pk, host).result(timeout=10)
    finally:
        host.close()

    assert started is not None
    claimed, emitter, _ = started
    run.refresh_from_db()
    assert claimed.pk == run.pk and run.status == Run.Status.RUNNING
    assert run.claim_token == emitter.claim_token is not None
    types = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", flat=True))
    assert types == ["RUN_STARTED", "STEP_STARTED"]
