"""A stage does not wait for the boundary before it to be written (runtime/execution.py,
``_stage_ahead``): with a real worker, the memory stage's model call goes out while the
worker's answer is still being stored (its transaction waits here for the thread's lock),
and the journal stays in order: the answer's end, the steps' events, then the memory's."""

import pytest
from django.db import transaction

from agent_runs.models import Message, Run, RunEvent
from agent_runs.services.steps import thread_lock_for_job
from tests.conftest import post_run, run_input, start_worker, stop_process, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def _kinds(run: Run) -> list[tuple[str, str | None]]:
    return [
        (event.type, event.payload.get("stepName"))
        for event in RunEvent.objects.filter(run=run).order_by("id")
    ]


def test_the_next_stage_s_model_call_does_not_wait_for_the_answer_s_store(alice, redis_queue):
    with FakeOpenAI() as model:
        model.chunk_delay = 0.2  # the worker's answer streams for a second
        worker = start_worker(
            AGENT_ROUTER_MODEL="openai/gpt-test",
            AGENT_WORKER_MODEL="openai/gpt-test",
            AGENT_MEMORY_MODEL="openai/gpt-test",
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="sk-test",
        )
        try:
            body = run_input()
            post_run(alice, body)
            run = Run.objects.get(run_id=body["runId"])
            wait_for(lambda: ("STEP_STARTED", "worker") in _kinds(run))
            with transaction.atomic():
                # What a request that changes the thread's runs holds: the answer's store
                # waits for it.
                thread_lock_for_job(thread_id=run.thread_id)
                wait_for(lambda: len(model.requests) == 3)  # the memory stage's call
                assert not Message.objects.filter(run=run, role=Message.Role.ASSISTANT).exists()
                assert ("TEXT_MESSAGE_END", None) not in _kinds(run)
            wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED)
        finally:
            stop_process(worker)

    kinds = _kinds(run)
    end = kinds.index(("TEXT_MESSAGE_END", None))
    assert kinds[end + 1 : end + 3] == [("STEP_FINISHED", "worker"), ("STEP_STARTED", "memory")]
    assert kinds[-2:] == [("STEP_FINISHED", "memory"), ("RUN_FINISHED", None)]
    seqs = list(RunEvent.objects.filter(run=run).order_by("id").values_list("seq", flat=True))
    assert seqs == list(range(len(seqs)))
    assert Message.objects.filter(run=run, role=Message.Role.ASSISTANT).count() == 1
