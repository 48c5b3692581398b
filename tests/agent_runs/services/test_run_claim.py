"""A run's hot statements, each one raw statement on PostgreSQL: its claim and load
(``run_claim_and_load``), which must claim exactly when the ORM's rule of turns would and load
the run, its thread and the thread's last event id as the ORM reads them; and a stage's
messages (``run_stage_messages_store``), appended under the claim. And the heartbeat of a
worker's claims (``runs_heartbeat``)."""

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from agent_runs.errors import RunNoLongerRunning
from agent_runs.models import Message, Run, RunEvent, Thread, Visibility
from agent_runs.selectors.runs import run_for_execution
from agent_runs.services import thread_line
from agent_runs.services.messages import StageAnswer, ToolResult, run_stage_messages_store
from agent_runs.services.run_claim import run_claim_and_load, runs_heartbeat

pytestmark = pytest.mark.django_db


def fields(instance: Any) -> dict[str, Any]:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


@pytest.fixture
def thread() -> Thread:
    owner = User.objects.create_user(username="alice")
    return Thread.objects.create(owner=owner, metadata={"topic": "tea", "n": [1, 2]})


def make_run(thread: Thread, status: str = Run.Status.QUEUED, **extra: Any) -> Run:
    return Run.objects.create(
        thread=thread,
        run_id=f"run-{uuid.uuid4().hex[:8]}",
        status=status,
        runtime_mode=Run.RuntimeMode.CHAT,
        input={"messages": [{"role": "user", "content": "Hi"}]},
        client_time={"timezone": "Europe/Berlin"},
        request={"protocol": "ag-ui"},
        **extra,
    )


def test_the_claim_loads_the_run_its_thread_and_last_event_as_the_orm_reads_them(thread):
    assert connection.vendor == "postgresql"
    earlier = make_run(thread, Run.Status.COMPLETED)
    RunEvent.objects.create(run=earlier, thread=thread, seq=0, type="RUN_STARTED", payload={})
    last = RunEvent.objects.create(
        run=earlier, thread=thread, seq=1, type="RUN_FINISHED", payload={}
    )
    run = make_run(thread, checkpoint={"next": "worker"})

    claimed = run_claim_and_load(run_pk=run.pk)

    assert claimed is not None
    loaded, last_event_id = claimed
    read, read_last = run_for_execution(run_pk=run.pk)
    assert last_event_id == read_last == last.pk
    assert fields(loaded) == fields(read)
    assert loaded.status == Run.Status.RUNNING and loaded.claim_token is not None
    assert loaded.input == {"messages": [{"role": "user", "content": "Hi"}]}  # decoded JSON
    assert fields(loaded.thread) == fields(read.thread)
    assert loaded.thread.metadata == {"topic": "tea", "n": [1, 2]}
    assert not loaded._state.adding  # a stored row: saving it updates


@pytest.mark.parametrize(
    ("before", "claimable"),
    [
        (None, True),
        (Run.Status.COMPLETED, True),
        (Run.Status.FAILED, True),
        (Run.Status.RUNNING, False),
        (Run.Status.QUEUED, False),
        (Run.Status.PAUSED, False),
        (Run.Status.CANCELLED, False),  # cancelled while queued, its journal not written yet
    ],
)
def test_the_statement_claims_exactly_when_the_orm_would(thread, before, claimable):
    if before is not None:
        make_run(thread, before)
    run = make_run(thread)
    # The ORM's rule, asked first without changing anything.
    orm_would = (
        Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED)
        .filter(~thread_line.TURN_TAKEN)
        .exists()
    )

    claimed = run_claim_and_load(run_pk=run.pk)

    assert orm_would is claimable
    assert (claimed is not None) is claimable
    assert Run.objects.get(pk=run.pk).status == (
        Run.Status.RUNNING if claimable else Run.Status.QUEUED
    )


def test_a_run_behind_a_cancelled_one_with_its_journal_written_is_claimed(thread):
    cancelled = make_run(thread, Run.Status.CANCELLED)
    RunEvent.objects.create(run=cancelled, thread=thread, seq=0, type="RUN_STARTED", payload={})
    run = make_run(thread)
    assert run_claim_and_load(run_pk=run.pk) is not None
    assert run_claim_and_load(run_pk=run.pk) is None  # once only


def test_a_later_run_does_not_hold_an_earlier_ones_turn(thread):
    run = make_run(thread)
    make_run(thread)  # queued after it
    assert run_claim_and_load(run_pk=run.pk) is not None


def test_a_stages_messages_follow_the_threads_last_seq_under_the_claim(thread):
    Thread.objects.filter(pk=thread.pk).update(last_seq=4)
    run = make_run(thread)
    claimed = run_claim_and_load(run_pk=run.pk)
    assert claimed is not None
    token = claimed[0].claim_token
    assert token is not None
    answer = StageAnswer(message_id="worker-1", content="Tea.", metadata={"route": "answer"})
    tools = [ToolResult(tool_call_id="c1", tool_name="calendar_list", args="{}", result="[]")]

    run_stage_messages_store(
        run=run, claim_token=token, stage="worker", tool_results=tools, answer=answer
    )

    stored = list(Message.objects.filter(thread=thread).order_by("seq"))
    assert [(m.seq, m.role, m.message_id, m.run_id) for m in stored] == [
        (5, Message.Role.TOOL, "tool-c1", run.pk),
        (6, Message.Role.ASSISTANT, "worker-1", run.pk),
    ]
    assert stored[0].metadata["tool_name"] == "calendar_list"
    assert stored[0].visibility_mask == int(Visibility.CONTEXT)
    assert stored[1].metadata == {"route": "answer"} and stored[1].content_blocks == []
    assert stored[1].visibility_mask == int(Visibility.ALL)
    assert Thread.objects.get(pk=thread.pk).last_seq == 6


def test_a_stage_of_a_run_no_longer_its_jobs_keeps_nothing(thread):
    run = make_run(thread)
    claimed = run_claim_and_load(run_pk=run.pk)
    assert claimed is not None
    token = claimed[0].claim_token
    assert token is not None
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)
    answer = StageAnswer(message_id="worker-1", content="Tea.", metadata={})

    with pytest.raises(RunNoLongerRunning):
        run_stage_messages_store(
            run=run,
            claim_token=token,
            stage="worker",
            tool_results=[],
            answer=answer,
        )
    assert not Message.objects.exists()
    assert Thread.objects.get(pk=thread.pk).last_seq == 0


def test_the_heartbeat_keeps_the_jobs_whose_run_is_running_or_completed_under_their_claim(
    thread,
):
    token = uuid.uuid4()
    running = make_run(thread, Run.Status.RUNNING, claim_token=token)
    completed = make_run(thread, Run.Status.COMPLETED, claim_token=token)
    cancelled = make_run(thread, Run.Status.CANCELLED, claim_token=token)
    failed = make_run(thread, Run.Status.FAILED, claim_token=token)
    taken = make_run(thread, Run.Status.RUNNING, claim_token=uuid.uuid4())
    claims = [(run.pk, token) for run in (running, completed, cancelled, failed, taken)]

    ours = runs_heartbeat(claims=claims)

    # A job that completed its run itself is ending: it is not stopped. One whose run was
    # cancelled, failed by the sweeper or claimed by another job is.
    assert ours == {running.pk, completed.pk}
    beaten = dict(Run.objects.values_list("pk", "heartbeat_at"))
    assert beaten[running.pk] is not None
    assert beaten[completed.pk] is None and beaten[taken.pk] is None
