"""The worker stage does not wait for the router's boundary to be written
(runtime/execution.py, ``_stage_ahead``): with a real worker, the worker's model call goes
out while the boundary's statement waits here for the thread's lock, and the journal stays
in order: the router's step end and the worker's start, then the worker's answer."""

import pytest
from django.db import transaction

from agent_runs.models import Run, RunEvent, Step
from agent_runs.services.steps import thread_lock_for_job
from tests.conftest import post_run, run_input, start_model_worker, stop_process, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def _kinds(run: Run) -> list[tuple[str, str | None]]:
    return [
        (event.type, event.payload.get("stepName"))
        for event in RunEvent.objects.filter(run=run).order_by("id")
    ]


def test_the_worker_s_model_call_does_not_wait_for_the_router_s_boundary(alice, redis_queue):
    with FakeOpenAI() as model:
        model.delay = 0.5  # each call is in flight for half a second
        worker = start_model_worker(model)
        try:
            body = run_input()
            post_run(alice, body)
            run = Run.objects.get(run_id=body["runId"])
            wait_for(lambda: model.requests)  # the router's call is in flight
            with transaction.atomic():
                # What a request that changes the thread's runs holds: the router's
                # boundary waits for it.
                thread_lock_for_job(thread_id=run.thread_id)
                wait_for(lambda: len(model.requests) == 2)  # the worker's call
                assert _kinds(run) == [("RUN_STARTED", None), ("STEP_STARTED", "router")]
                assert Step.objects.get(run=run, name="router").status == Step.Status.RUNNING
            wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED)
        finally:
            stop_process(worker)

    kinds = _kinds(run)
    assert kinds[:4] == [
        ("RUN_STARTED", None),
        ("STEP_STARTED", "router"),
        ("STEP_FINISHED", "router"),
        ("STEP_STARTED", "worker"),
    ]
    assert ("TEXT_MESSAGE_START", None) in kinds[4:]
    assert kinds[-1] == ("RUN_FINISHED", None)
    seqs = list(RunEvent.objects.filter(run=run).order_by("id").values_list("seq", flat=True))
    assert seqs == list(range(len(seqs)))
