"""A stage boundary (``steps.agent_step_advance``): the step's end and the next one's start,
one statement on PostgreSQL, the park decided in it from the run's flags; fenced on the
job's claim like the job's other writes."""

import uuid

import pytest

from agent_runs.errors import RunNoLongerRunning
from agent_runs.models import Run, Step, agent_step_id
from agent_runs.services.run_claim import run_claim
from agent_runs.services.run_request import STEP_BUDGET_KEY
from agent_runs.services.steps import StepBegin, StepEnd, agent_step_advance, agent_step_start
from tests.conftest import post_run, run_input

pytestmark = pytest.mark.django_db(transaction=True)


def _router_running(client) -> tuple[Run, uuid.UUID]:
    body = run_input()
    post_run(client, body)
    run = Run.objects.get(run_id=body["runId"])
    token = run_claim(run_pk=run.pk)
    assert token is not None
    agent_step_start(run=run, claim_token=token, stage="router", input="hi")
    return run, token


def _advance(run: Run, token: uuid.UUID):
    return agent_step_advance(
        run=run,
        claim_token=token,
        ended=StepEnd(
            stage="router",
            output={"route": "answer"},
            additional_output={"latency_ms": 3},
            is_last=False,
        ),
        done=1,
        then=StepBegin(stage="worker", input="hi"),
    )


def _steps(run: Run) -> dict[str, tuple[str, object]]:
    return {step.name: (step.status, step.output) for step in Step.objects.filter(run=run)}


def test_the_step_ends_and_the_next_one_starts(alice, redis_queue):
    run, token = _router_running(alice)

    control, begun = _advance(run, token)

    assert begun and not control.pause_requested and control.step_budget is None
    assert _steps(run) == {
        "router": (Step.Status.COMPLETED, {"route": "answer"}),
        "worker": (Step.Status.RUNNING, None),
    }
    worker = Step.objects.get(run=run, name="worker")
    assert worker.pk == agent_step_id(thread_id=run.thread_id, run_id=run.run_id, stage="worker")
    assert worker.input == "hi" and worker.started_at is not None
    router = Step.objects.get(run=run, name="router")
    assert router.additional_output == {"latency_ms": 3} and router.completed_at is not None


@pytest.mark.parametrize(
    ("pause", "budget", "begins"),
    [(True, None, False), (False, 1, False), (False, 2, True), (True, 2, False)],
)
def test_a_pause_or_a_spent_budget_parks_the_run_at_the_boundary(
    alice, redis_queue, pause, budget, begins
):
    run, token = _router_running(alice)
    request = {**(run.request or {}), STEP_BUDGET_KEY: budget} if budget else run.request
    Run.objects.filter(pk=run.pk).update(pause_requested=pause, request=request)

    control, begun = _advance(run, token)

    assert begun is begins
    assert control.pause_requested is pause and control.step_budget == budget
    assert control.parks_after(1) is not begins
    assert _steps(run)["router"][0] == Step.Status.COMPLETED
    assert ("worker" in _steps(run)) is begins


def test_a_job_that_lost_its_claim_changes_nothing(alice, redis_queue):
    run, _ = _router_running(alice)

    with pytest.raises(RunNoLongerRunning):
        _advance(run, uuid.uuid4())

    assert _steps(run) == {"router": (Step.Status.RUNNING, None)}
