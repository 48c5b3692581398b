"""Cancel: a running run's job is stopped for real; a queued run never starts."""

import time

import pytest
from rq.job import Job, JobStatus

from agent_runs.models import Message, Run
from tests.agent_runs.sse import read_sse
from tests.conftest import (
    post_run,
    run_input,
    start_worker,
    stop_process,
    wait_for,
    work_burst,
)
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def cancel(client, run_id, **query):
    suffix = "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
    return client.post(f"/api/v1/agent/runs/{run_id}/cancel{suffix}")


def start_slow_model_worker(slow_model, **env):
    """A real worker whose model is the loopback server (slowed down by the test)."""
    slow_model.delay = 30  # the model would answer long after the test is over
    return start_worker(
        AGENT_WORKER_MODEL="openai/gpt-test",
        OPENAI_BASE_URL=slow_model.base_url,
        OPENAI_API_KEY="sk-test",
        **env,
    )


def test_cancelling_a_running_run_stops_its_model_call_and_ends_its_stream(
    alice, alice_token, redis_queue, daphne_port
):
    with FakeOpenAI() as slow_model:
        worker = start_slow_model_worker(slow_model)
        try:
            body = run_input()
            post_run(alice, body)
            wait_for(lambda: slow_model.requests)  # the model call is in flight

            started = time.monotonic()
            response = cancel(alice, body["runId"])
            took = time.monotonic() - started
            run = Run.objects.get(run_id=body["runId"])
            job = Job.fetch(str(run.task_id), connection=redis_queue.connection)
            assert job.get_status() == JobStatus.STOPPED  # stopped, not finished

            # The worker stopped the job, not itself: it runs the thread's next run.
            slow_model.delay = 0
            post_run(alice, run_input(threadId=body["threadId"], runId="after-cancel"))
            wait_for(lambda: Run.objects.get(run_id="after-cancel").status == "completed")
        finally:
            stop_process(worker)

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert took < 1.0  # stopped within a second (the request waits until it has)
    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.CANCELLED
    assert not Message.objects.filter(run=run, role="assistant").exists()
    stream = read_sse(daphne_port, body["threadId"], token=alice_token, query={"lastEventId": "0"})
    events = [frame for frame in stream.events if frame["data"]["runId"] == body["runId"]]
    types = [frame["event"] for frame in events]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_ERROR"
    assert events[-1]["data"]["code"] == "cancelled"
    assert "RUN_FINISHED" not in types


def test_a_cancelled_queued_run_never_starts_and_the_next_run_goes_on(
    alice, alice_token, redis_queue, daphne_port
):
    first = run_input(runId="run-1")
    post_run(alice, first)
    post_run(alice, run_input(threadId=first["threadId"], runId="run-2"))

    response = cancel(alice, "run-1")
    again = cancel(alice, "run-1")
    work_burst(redis_queue)

    assert response.status_code == again.status_code == 200
    assert again.json()["status"] == "cancelled"  # twice is harmless
    run_1 = Run.objects.get(run_id="run-1")
    run_2 = Run.objects.get(run_id="run-2")
    assert run_1.status == Run.Status.CANCELLED and run_1.started_at is None
    assert run_2.status == Run.Status.COMPLETED
    assert list(run_1.events.values_list("type", flat=True)) == ["RUN_STARTED", "RUN_ERROR"]
    assert not Message.objects.filter(run=run_1, role="assistant").exists()


def test_cancelling_an_ended_run_changes_nothing(alice, redis_queue):
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)

    response = cancel(alice, body["runId"])

    assert response.status_code == 200 and response.json()["status"] == "completed"
    assert Run.objects.get(run_id=body["runId"]).events.filter(type="RUN_ERROR").count() == 0


def test_a_stranger_cannot_cancel_and_a_reused_run_id_needs_its_thread(alice, bob, redis_queue):
    first = run_input(runId="same")
    post_run(alice, first)
    post_run(alice, run_input(runId="same"))

    assert cancel(bob, "same").status_code == 404
    ambiguous = cancel(alice, "same")
    assert ambiguous.status_code == 409
    assert ambiguous.json() == {"detail": "runId is used in several threads: pass threadId"}
    assert cancel(alice, "same", threadId=first["threadId"]).json()["status"] == "cancelled"
    assert Run.objects.filter(status=Run.Status.QUEUED).count() == 1


def test_a_long_run_keeps_beating_so_the_sweeper_leaves_it_running(alice, redis_queue, settings):
    from agent_runs.services.lifecycle import runs_recover

    with FakeOpenAI() as slow_model:
        worker = start_slow_model_worker(
            slow_model, AGENT_RUN_HEARTBEAT_SECONDS="1", AGENT_RUN_STALE_SECONDS="3"
        )
        try:
            body = run_input()
            post_run(alice, body)
            wait_for(lambda: slow_model.requests)
            settings.AGENT_RUN_STALE_SECONDS = 3
            time.sleep(4.5)  # longer than a run may go without a heartbeat

            assert runs_recover() == (0, 0)
            assert Run.objects.get(run_id=body["runId"]).status == Run.Status.RUNNING
            assert cancel(alice, body["runId"]).json()["status"] == "cancelled"
        finally:
            stop_process(worker)


def test_a_killed_workers_run_is_failed_by_the_sweeper_and_the_next_run_proceeds(
    alice, alice_token, redis_queue, daphne_port, settings
):
    import subprocess

    with FakeOpenAI() as slow_model:
        worker = start_slow_model_worker(slow_model)
        body = run_input(runId="run-1")
        post_run(alice, body)
        post_run(alice, run_input(threadId=body["threadId"], runId="run-2"))
        wait_for(lambda: slow_model.requests)
        # The machine is lost: the worker dies without a word.
        subprocess.run(["pkill", "-KILL", "-P", str(worker.pid)], check=False)
        worker.kill()
        worker.wait()

    assert Run.objects.get(run_id="run-1").status == Run.Status.RUNNING
    settings.AGENT_RUN_STALE_SECONDS = 1
    time.sleep(1.5)
    work_burst(redis_queue)  # a surviving worker sweeps

    run_1 = Run.objects.get(run_id="run-1")
    assert run_1.status == Run.Status.FAILED
    assert run_1.events.get(type="RUN_ERROR").payload["code"] == "worker_lost"
    assert Run.objects.get(run_id="run-2").status == Run.Status.COMPLETED
    stream = read_sse(daphne_port, body["threadId"], token=alice_token, query={"lastEventId": "0"})
    run_1_types = [f["event"] for f in stream.events if f["data"]["runId"] == "run-1"]
    assert run_1_types[0] == "RUN_STARTED" and run_1_types[-1] == "RUN_ERROR"
