"""Task control with a real worker and a model in flight: a pause parks the task at the next
stage boundary (its job ends: no worker held) and a resume goes on without repeating a
finished stage; a cancel stops the model call in flight and fails the running step."""

import time

import pytest
from rq.job import Job, JobStatus

from agent_runs.models import Run, RunEvent, Step
from agent_runs.services.lifecycle import run_park
from agent_runs.services.run_claim import run_claim
from agent_runs.services.run_request import STEP_BUDGET_KEY
from tests.conftest import send, start_model_worker, stop_process, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def model_worker(model):
    """A real worker whose three stages all call the loopback model."""
    return start_model_worker(model)


def router_calls(model):
    return [
        request
        for request in model.requests
        if "generate_structured_output"
        in {tool["function"]["name"] for tool in request["body"].get("tools", [])}
    ]


def create_task(client):
    response = send(lambda: client.post("/api/tasks", {"task": "Plan my day"}, format="json"))
    assert response.status_code == 200, response.content
    return response.json()["agent"]["id"]


def test_a_pause_parks_the_task_at_the_next_boundary_and_resume_repeats_nothing(alice, redis_queue):
    with FakeOpenAI() as model:
        model.delay = 1.0
        worker = model_worker(model)
        try:
            task_id = create_task(alice)
            wait_for(lambda: router_calls(model))  # the router's model call is in flight
            paused = alice.post(f"/api/tasks/{task_id}/pause")
            assert paused.json() == {"task_id": task_id, "status": "paused"}
            assert alice.get(f"/api/tasks/{task_id}").json()["status"] == "paused"

            run = Run.objects.get(thread_id=task_id)
            wait_for(lambda: Run.objects.get(pk=run.pk).status == "paused")
            run.refresh_from_db()
            # Parked after the router, never in its model call: the router's step finished.
            checkpoint = run.checkpoint
            assert checkpoint is not None and checkpoint["next"] == "worker"
            assert checkpoint["decision"]["route"] == "use_tools"
            assert run.claim_token is None and not run.pause_requested
            parked_steps = {step.name: step.status for step in Step.objects.filter(run=run)}
            assert parked_steps == {"router": "completed"}
            # Its job has ended: the task holds no worker while paused.
            job = Job.fetch(str(run.task_id), connection=redis_queue.connection)
            wait_for(lambda: job.get_status(refresh=True) == JobStatus.FINISHED)
            calls_when_parked = len(model.requests)
            time.sleep(1.5)
            assert len(model.requests) == calls_when_parked  # nothing runs meanwhile
            assert Run.objects.get(pk=run.pk).status == "paused"

            model.delay = 0
            resumed = send(lambda: alice.post(f"/api/tasks/{task_id}/resume"))
            assert resumed.status_code == 200
            assert resumed.json()["status"] in ("created", "running", "completed")
            wait_for(lambda: Run.objects.get(pk=run.pk).status == "completed")
        finally:
            stop_process(worker)

        assert len(router_calls(model)) == 1  # the router stage ran once
        steps = list(Step.objects.filter(run=run).order_by("created_at"))
        assert [step.name for step in steps] == ["router", "worker", "memory"]
        assert all(step.status == "completed" for step in steps)
        kinds = [
            (event.type, event.payload.get("stepName") or event.payload.get("name"))
            for event in RunEvent.objects.filter(run=run).order_by("seq")
        ]
        assert kinds.count(("RUN_STARTED", None)) == 1
        assert kinds.count(("STEP_STARTED", "router")) == 1
        parked = kinds.index(("CUSTOM", "run_paused"))
        assert kinds[parked - 1] == ("STEP_FINISHED", "router")
        assert kinds[parked + 1] == ("CUSTOM", "run_resumed")
        assert kinds[parked + 2] == ("STEP_STARTED", "worker")
        assert kinds[-1] == ("RUN_FINISHED", None)
        seqs = list(RunEvent.objects.filter(run=run).order_by("id").values_list("seq", flat=True))
        assert seqs == list(range(len(seqs)))  # one journal, numbered without a gap


def test_a_cancel_stops_the_model_call_in_flight_and_fails_the_running_step(alice, redis_queue):
    with FakeOpenAI() as model:
        model.delay = 30  # would answer long after the test is over
        worker = model_worker(model)
        try:
            task_id = create_task(alice)
            wait_for(lambda: router_calls(model))
            started = time.monotonic()
            cancelled = send(lambda: alice.post(f"/api/tasks/{task_id}/cancel"))
            took = time.monotonic() - started
            assert cancelled.json() == {"task_id": task_id, "status": "cancelled"}
            run = Run.objects.get(thread_id=task_id)
            job = Job.fetch(str(run.task_id), connection=redis_queue.connection)
            assert job.get_status() == JobStatus.STOPPED  # stopped, not left to finish
            assert took < 5
            again = send(lambda: alice.post(f"/api/tasks/{task_id}/cancel"))
            assert again.json() == {"task_id": task_id, "status": "cancelled"}
        finally:
            stop_process(worker)
        (step,) = Step.objects.filter(run=run)
        assert step.name == "router" and step.status == "failed" and step.completed_at
        assert alice.get(f"/api/tasks/{task_id}").json()["status"] == "cancelled"
        last = RunEvent.objects.filter(run=run).order_by("-seq").first()
        assert last is not None
        assert last.type == "RUN_ERROR" and last.payload["code"] == "cancelled"
        resumed = alice.post(f"/api/tasks/{task_id}/resume")
        assert resumed.status_code == 409


def test_a_paused_queued_task_holds_its_thread_and_a_cancel_ends_its_journal(alice, redis_queue):
    """Parked after a step (no job), then cancelled: its journal ends with RUN_ERROR at once."""
    with FakeOpenAI() as model:
        model.delay = 0.5
        worker = model_worker(model)
        try:
            task_id = create_task(alice)
            wait_for(lambda: router_calls(model))
            alice.post(f"/api/tasks/{task_id}/pause")
            run = Run.objects.get(thread_id=task_id)
            wait_for(lambda: Run.objects.get(pk=run.pk).status == "paused")
            send(lambda: alice.post(f"/api/tasks/{task_id}/cancel"))
        finally:
            stop_process(worker)
        types = list(
            RunEvent.objects.filter(run=run).order_by("seq").values_list("type", flat=True)
        )
        assert types[0] == "RUN_STARTED" and types[-1] == "RUN_ERROR"
        assert types.count("RUN_ERROR") == 1 and "RUN_FINISHED" not in types
        assert Run.objects.get(pk=run.pk).status == "cancelled"


def test_a_job_does_not_park_a_run_whose_pause_was_called_off_meanwhile(alice, redis_queue):
    """The boundary check and the park are two statements: a resume between them wins."""
    task_id = create_task(alice)
    run = Run.objects.get(thread_id=task_id)
    token = run_claim(run_pk=run.pk)
    assert token is not None
    # The job saw a pause asked for; the client called it off before the job parked.
    assert not run_park(run=run, claim_token=token, checkpoint={"next": "worker"}, done=1)
    assert Run.objects.get(pk=run.pk).status == "running"
    Run.objects.filter(pk=run.pk).update(request={**run.request, "step_budget": 2})
    assert not run_park(run=run, claim_token=token, checkpoint={"next": "worker"}, done=1)
    Run.objects.filter(pk=run.pk).update(pause_requested=True)
    assert run_park(run=run, claim_token=token, checkpoint={"next": "worker"}, done=1)
    parked = Run.objects.get(pk=run.pk)
    assert parked.status == "paused" and parked.claim_token is None
    assert parked.checkpoint == {"next": "worker"} and not parked.pause_requested


def test_no_model_call_goes_out_for_a_stage_the_run_s_step_budget_leaves_out(alice, redis_queue):
    """A run that may run one stage (a step-by-step client's) parks after its router, and
    no model call goes out for the worker."""
    with FakeOpenAI() as model:
        task_id = create_task(alice)
        run = Run.objects.get(thread_id=task_id)
        Run.objects.filter(pk=run.pk).update(request={**run.request, STEP_BUDGET_KEY: 1})
        worker = model_worker(model)
        try:
            wait_for(lambda: Run.objects.get(pk=run.pk).status == "paused")
            time.sleep(0.3)
        finally:
            stop_process(worker)
    assert len(model.requests) == len(router_calls(model)) == 1
    assert {step.name: step.status for step in Step.objects.filter(run=run)} == {
        "router": "completed"
    }
