"""A stage boundary (``steps.agent_step_advance``): the step's end and the next one's start,
one statement on PostgreSQL, the park decided in it from the run's flags; fenced on the
job's claim like the job's other writes. And the job's boundary with its events and the
thread's lock in that statement (``agent_step_advance_journaled``), and a run's first step
with the events of its start (``agent_step_start_journaled``)."""

import asyncio
import threading
import uuid
from collections.abc import Callable

import pytest
from ag_ui.core import RunFinishedEvent, RunStartedEvent, StepFinishedEvent, StepStartedEvent
from django.db import connections, transaction

from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.emitter import RunEventEmitter
from agent_runs.events.store import stream_key
from agent_runs.models import Run, RunEvent, Step, agent_step_id
from agent_runs.services.lifecycle import run_complete_journaled
from agent_runs.services.run_claim import run_claim
from agent_runs.services.run_request import STEP_BUDGET_KEY
from agent_runs.services.steps import (
    StepBegin,
    StepEnd,
    agent_step_advance,
    agent_step_advance_journaled,
    agent_step_start,
    agent_step_start_journaled,
    thread_lock_for_job,
)
from agent_runs.signals import run_status_changed
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


# -- the boundary with its events, in one statement (PostgreSQL) -----------------------------


def _journaled_setup(client) -> tuple[Run, uuid.UUID, RunEventEmitter]:
    """A run claimed, its router's step started and announced, and the job's emitter (on a
    loop, as a job's is; the loop never runs: what is tested is written here)."""
    run, token = _router_running(client)
    emitter = RunEventEmitter(run=run, claim_token=token, loop=asyncio.new_event_loop())
    emitter.emit_here(
        [
            RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id),
            StepStartedEvent(step_name="router", threadId=str(run.thread_id), runId=run.run_id),
        ]
    )
    return run, token, emitter


def _advance_journaled(run: Run, token: uuid.UUID, emitter: RunEventEmitter):
    ids = {"threadId": str(run.thread_id), "runId": run.run_id}
    held = emitter.hold_here(
        [StepFinishedEvent(step_name="router", **ids), StepStartedEvent(step_name="worker", **ids)],
        last_optional=True,
    )
    control, begun, written = agent_step_advance_journaled(
        run=run,
        claim_token=token,
        ended=StepEnd(
            stage="router", output={"route": "answer"}, additional_output={}, is_last=False
        ),
        done=1,
        then=StepBegin(stage="worker", input="hi"),
        events=held,
    )
    emitter.held_written(held, written)
    return control, begun, written


def _journal(run: Run) -> list[tuple[int, str]]:
    return list(RunEvent.objects.filter(run=run).order_by("id").values_list("seq", "type"))


def test_the_boundary_writes_its_steps_and_events_in_one_statement(alice, redis_queue):
    run, token, emitter = _journaled_setup(alice)

    control, begun, written = _advance_journaled(run, token, emitter)

    assert begun and not control.pause_requested
    assert _steps(run) == {
        "router": (Step.Status.COMPLETED, {"route": "answer"}),
        "worker": (Step.Status.RUNNING, None),
    }
    assert _journal(run) == [
        (0, "RUN_STARTED"),
        (1, "STEP_STARTED"),
        (2, "STEP_FINISHED"),
        (3, "STEP_STARTED"),
    ]
    assert written == list(
        RunEvent.objects.filter(run=run, seq__gte=2).order_by("seq").values_list("id", flat=True)
    )
    # Published as one stream entry once written, and the emitter goes on after them.
    entries = redis_queue.connection.xrange(stream_key(run.thread_id))
    assert entries[-1][1][b"ids"] == ",".join(map(str, written)).encode()
    assert (emitter.next_seq, emitter.previous_id) == (4, written[-1])


def test_a_run_parked_at_the_boundary_gets_no_step_started(alice, redis_queue):
    run, token, emitter = _journaled_setup(alice)
    Run.objects.filter(pk=run.pk).update(pause_requested=True)

    control, begun, written = _advance_journaled(run, token, emitter)

    assert not begun and control.pause_requested and len(written) == 1
    assert _journal(run)[-1] == (2, "STEP_FINISHED")
    assert "worker" not in _steps(run)
    # The STEP_STARTED left out is as if never emitted: its ordinal is the next event's, and
    # the worker's step may still start (it is not open).
    assert emitter.next_seq == 3
    emitter.emit_here(
        [StepStartedEvent(step_name="worker", threadId=str(run.thread_id), runId=run.run_id)]
    )
    assert _journal(run)[-1] == (3, "STEP_STARTED")


def test_a_boundary_that_lost_its_claim_writes_nothing(alice, redis_queue):
    run, _, emitter = _journaled_setup(alice)

    with pytest.raises(RunNoLongerRunning), emitter.rewound_on_failure():
        _advance_journaled(run, uuid.uuid4(), emitter)

    assert _steps(run) == {"router": (Step.Status.RUNNING, None)}
    assert _journal(run) == [(0, "RUN_STARTED"), (1, "STEP_STARTED")]
    assert emitter.next_seq == 2


def _waits_for_the_threads_lock(
    run: Run, write: Callable[[], object], *, undone: Callable[[], bool]
) -> object:
    """``write()`` on another connection while this one holds the run's thread's lock (what a
    request that changes the thread's runs takes first): it has done nothing (``undone``)
    while the lock is held, and goes on once it is let go; what it returned."""
    outcome: list[object] = []

    def run_it() -> None:
        try:
            outcome.append(write())
        finally:
            connections.close_all()

    writer = threading.Thread(target=run_it)
    with transaction.atomic():
        thread_lock_for_job(thread_id=run.thread_id)
        writer.start()
        writer.join(timeout=0.5)
        assert writer.is_alive() and undone()
    writer.join(timeout=10)
    assert len(outcome) == 1
    return outcome[0]


def test_the_boundary_waits_for_the_threads_lock(alice, redis_queue):
    run, token, emitter = _journaled_setup(alice)

    begun = _waits_for_the_threads_lock(
        run,
        lambda: _advance_journaled(run, token, emitter)[1],
        undone=lambda: _steps(run)["router"][0] == Step.Status.RUNNING,
    )

    assert begun is True
    assert _steps(run)["router"][0] == Step.Status.COMPLETED


def _claimed_with_emitter(client) -> tuple[Run, uuid.UUID, RunEventEmitter]:
    body = run_input()
    post_run(client, body)
    run = Run.objects.get(run_id=body["runId"])
    token = run_claim(run_pk=run.pk)
    assert token is not None
    return run, token, RunEventEmitter(run=run, claim_token=token, loop=asyncio.new_event_loop())


def _start_journaled(run: Run, token: uuid.UUID, emitter: RunEventEmitter) -> list[int]:
    ids = {"threadId": str(run.thread_id), "runId": run.run_id}
    held = emitter.hold_here(
        [
            RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id),
            StepStartedEvent(step_name="router", **ids),
        ]
    )
    written = agent_step_start_journaled(
        run=run, claim_token=token, stage="router", input="hi", events=held
    )
    emitter.held_written(held, written)
    return written


def test_a_runs_first_step_and_its_events_are_one_statement(alice, redis_queue):
    run, token, emitter = _claimed_with_emitter(alice)

    with transaction.atomic():
        written = _start_journaled(run, token, emitter)
        # Published once the transaction commits, not before.
        assert not redis_queue.connection.exists(stream_key(run.thread_id))

    assert _steps(run) == {"router": (Step.Status.RUNNING, None)}
    assert _journal(run) == [(0, "RUN_STARTED"), (1, "STEP_STARTED")]
    entries = redis_queue.connection.xrange(stream_key(run.thread_id))
    assert [entry[1][b"ids"] for entry in entries] == [",".join(map(str, written)).encode()]
    assert emitter.next_seq == 2


def test_a_first_step_whose_claim_is_lost_writes_nothing(alice, redis_queue):
    run, _, emitter = _claimed_with_emitter(alice)

    with pytest.raises(RunNoLongerRunning), emitter.rewound_on_failure():
        _start_journaled(run, uuid.uuid4(), emitter)

    assert _steps(run) == {} and _journal(run) == []
    assert emitter.next_seq == 0


# -- a run's end with its last step and events, in one statement (PostgreSQL) ----------------


def _end_journaled(run: Run, token: uuid.UUID, emitter: RunEventEmitter) -> list[int] | None:
    ids = {"threadId": str(run.thread_id), "runId": run.run_id}
    held = emitter.hold_here(
        [
            StepFinishedEvent(step_name="router", **ids),
            RunFinishedEvent(thread_id=str(run.thread_id), run_id=run.run_id),
        ],
        ending=True,
    )
    written = run_complete_journaled(
        run=run,
        claim_token=token,
        closing=StepEnd(stage="router", output="done", additional_output={}, is_last=True),
        events=held,
    )
    if written is not None:
        emitter.held_written(held, written)
    return written


def test_a_runs_end_its_last_step_and_events_are_one_statement(alice, redis_queue):
    run, token, emitter = _journaled_setup(alice)
    heard: list[str] = []
    run_status_changed.connect(
        lambda sender, run, status, **kwargs: heard.append(status), weak=False, dispatch_uid="t"
    )
    try:
        with transaction.atomic():
            written = _end_journaled(run, token, emitter)
            # Published once the transaction commits, not before.
            assert redis_queue.connection.xlen(stream_key(run.thread_id)) == 1
    finally:
        run_status_changed.disconnect(dispatch_uid="t")

    assert written is not None and heard == [Run.Status.COMPLETED]
    ended = Run.objects.get(pk=run.pk)
    assert ended.status == Run.Status.COMPLETED and ended.finished_at is not None
    assert run.status == Run.Status.COMPLETED
    assert _steps(run) == {"router": (Step.Status.COMPLETED, "done")}
    assert Step.objects.get(run=run).is_last
    assert _journal(run) == [
        (0, "RUN_STARTED"),
        (1, "STEP_STARTED"),
        (2, "STEP_FINISHED"),
        (3, "RUN_FINISHED"),
    ]
    entries = redis_queue.connection.xrange(stream_key(run.thread_id))
    assert entries[-1][1][b"ids"] == ",".join(map(str, written)).encode()
    assert emitter.ended


def test_a_runs_end_whose_claim_is_lost_changes_nothing(alice, redis_queue):
    run, _, emitter = _journaled_setup(alice)

    with emitter.rewound_on_failure():
        assert _end_journaled(run, uuid.uuid4(), emitter) is None

    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
    assert _steps(run) == {"router": (Step.Status.RUNNING, None)}
    assert _journal(run) == [(0, "RUN_STARTED"), (1, "STEP_STARTED")]


def test_a_runs_end_waits_for_the_threads_lock(alice, redis_queue):
    run, token, emitter = _journaled_setup(alice)

    written = _waits_for_the_threads_lock(
        run,
        lambda: _end_journaled(run, token, emitter),
        undone=lambda: Run.objects.get(pk=run.pk).status == Run.Status.RUNNING,
    )

    assert written is not None
    assert Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED
