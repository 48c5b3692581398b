"""``run_create``'s rule of turns (``RunOptions.turn``): checked under the thread's row lock,
so of two runs sent at once on one thread only one passes, and a retry of a run that exists
answers that run. The Responses API (a busy conversation, ``previous_response_id``) and A2A
(a follow-up to a task) refuse their turns through it."""

import threading
import uuid
from functools import partial
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser, User

from agent_runs.errors import RunIdConflict, RunNotLatest, ThreadBusy, TurnRefused
from agent_runs.models import Message, Run, Thread
from agent_runs.run_input import ForwardedProps, InputMessage, RunAgentInput
from agent_runs.services.runs import RunOptions, TurnRule, run_create
from tests.agent_runs.concurrency import at_once_behind_lock, in_threads, join

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(redis_queue: Any) -> User:
    return User.objects.create_user(username="alice")


def turn_input(
    thread_id: uuid.UUID, run_id: str, *, parent: str | None = None, text: str = "Hello"
) -> RunAgentInput:
    return RunAgentInput(
        thread_id=thread_id,
        run_id=run_id,
        parent_run_id=parent,
        messages=[InputMessage(id=f"msg-{run_id}", role="user", content=text)],
        forwarded_props=ForwardedProps(runtime_mode="chat"),
    )


def create(
    user: AbstractBaseUser, thread_id: uuid.UUID, run_id: str, turn: TurnRule | None, **kw: Any
) -> Run:
    return run_create(
        user=user, run_input=turn_input(thread_id, run_id, **kw), options=RunOptions(turn=turn)
    )


def ended_run(user: AbstractBaseUser, thread_id: uuid.UUID, run_id: str, **kw: Any) -> Run:
    run = create(user, thread_id, run_id, None, **kw)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    return run


RULES = {
    "idle thread": (lambda _task: TurnRule(), ThreadBusy),
    "after the latest run": (lambda task: TurnRule(after_run_id=task), RunNotLatest),
    "a task's follow-up": (lambda task: TurnRule(after_run_id=task, chain=task), RunNotLatest),
}


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
def test_two_turns_sent_at_once_on_an_idle_thread_create_one_run(alice, rule):
    make_rule, refusal = rule
    thread_id = uuid.uuid4()
    task = ended_run(alice, thread_id, "task-1")
    turn = make_rule(task.run_id)
    follow_ups = [
        partial(create, alice, thread_id, f"turn-{n}", turn, parent="task-1") for n in (1, 2)
    ]

    # Both calls get as far as the thread's lock, held here as by a third request, and
    # both would find the thread idle if they looked before taking it.
    outcomes = at_once_behind_lock(thread_id, follow_ups)

    created = [outcome for outcome in outcomes if isinstance(outcome, Run)]
    refused = [outcome for outcome in outcomes if isinstance(outcome, TurnRefused)]
    assert len(created) == 1 and len(refused) == 1, outcomes
    assert type(refused[0]) is refusal
    assert list(
        Run.objects.filter(thread_id=thread_id).order_by("pk").values_list("run_id", flat=True)
    ) == [
        "task-1",
        created[0].run_id,
    ]
    assert Message.objects.filter(thread_id=thread_id).count() == 2


def test_two_first_turns_of_a_new_conversation_at_once_create_one_run(alice):
    thread_id = uuid.uuid4()
    barrier = threading.Barrier(2)

    def first_turn(run_id: str) -> Run:
        barrier.wait(timeout=10)
        return create(alice, thread_id, run_id, TurnRule())

    threads, outcomes = in_threads([lambda: first_turn("one"), lambda: first_turn("two")])
    join(threads)

    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["Run", "ThreadBusy"]
    assert Thread.objects.filter(pk=thread_id).count() == 1
    assert Run.objects.filter(thread_id=thread_id).count() == 1


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
def test_a_retry_of_the_same_run_answers_it_though_it_makes_the_thread_busy(alice, rule):
    make_rule, _refusal = rule
    thread_id = uuid.uuid4()
    ended_run(alice, thread_id, "task-1")
    turn = make_rule("task-1")
    first = create(alice, thread_id, "turn-1", turn, parent="task-1")

    retry = create(alice, thread_id, "turn-1", turn, parent="task-1")

    assert retry.pk == first.pk and retry.status == Run.Status.QUEUED
    with pytest.raises(RunIdConflict):  # the same runId with another body: not "busy"
        create(alice, thread_id, "turn-1", turn, parent="task-1", text="Something else")
    assert Run.objects.filter(thread_id=thread_id).count() == 2
    assert Message.objects.filter(thread_id=thread_id).count() == 2


def test_a_turn_on_a_busy_thread_is_refused_and_writes_nothing(alice):
    thread_id = uuid.uuid4()
    create(alice, thread_id, "running", None)
    Run.objects.filter(run_id="running").update(status=Run.Status.RUNNING)

    with pytest.raises(ThreadBusy) as busy:
        create(alice, thread_id, "second", TurnRule())
    with pytest.raises(ThreadBusy):
        create(alice, thread_id, "second", TurnRule(after_run_id="running"))

    assert busy.value.status == 409
    assert list(Run.objects.values_list("run_id", flat=True)) == ["running"]
    assert Message.objects.count() == 1
    create(alice, thread_id, "queued-behind", None)  # without a rule a run waits its turn
    assert Run.objects.count() == 2


def test_a_turn_after_a_run_that_is_no_longer_the_latest_is_refused_first(alice):
    thread_id = uuid.uuid4()
    ended_run(alice, thread_id, "one")
    create(alice, thread_id, "two", None)  # queued: the thread is busy too

    with pytest.raises(RunNotLatest):
        create(alice, thread_id, "fork", TurnRule(after_run_id="one"))
    assert Run.objects.count() == 2


def test_a_chain_looks_only_at_its_own_runs(alice):
    thread_id = uuid.uuid4()
    ended_run(alice, thread_id, "task-1")
    create(alice, thread_id, "task-2", None)  # another task of the thread, still queued

    follow_up = create(
        alice,
        thread_id,
        "follow-up",
        TurnRule(after_run_id="task-1", chain="task-1"),
        parent="task-1",
    )

    assert follow_up.parent_run_id == "task-1"
    with pytest.raises(RunNotLatest):  # the task's latest run is now the follow-up
        create(alice, thread_id, "again", TurnRule(after_run_id="task-1", chain="task-1"))
