"""What a run's stages read of their thread (``agent_runs/selectors/context.py``): the newest
turns that fit the budget, each stage only the messages its visibility bit allows."""

import pytest

from agent_runs.models import Message
from tests.conftest import post_run, run_input

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def reads_of(run_id: str, consumers, token_budget: int = 1000):
    """What the job of the run ``run_id`` reads as it starts."""
    from agent_runs.models import Run
    from agent_runs.selectors.context import turn_reads

    run = Run.objects.select_related("thread").get(run_id=run_id)
    return turn_reads(
        user_run_pk=run.pk,
        thread_id=run.thread_id,
        user_id=run.thread.owner_id,
        memory_limit=10,
        consumers=consumers,
        token_budget=token_budget,
    )


def test_context_keeps_the_newest_turns_that_fit_the_budget(alice, redis_queue):
    from agent_runs.models import Visibility

    body = run_input(messages=[{"id": "m1", "role": "user", "content": "x" * 400}])
    post_run(alice, body)
    for index, text in enumerate(["second", "third", "fourth"], start=2):
        last = run_input(
            threadId=body["threadId"],
            messages=[{"id": f"m{index}", "role": "user", "content": text}],
        )
        post_run(alice, last)

    everything, newest = (
        reads_of(last["runId"], [Visibility.WORKER], token_budget=budget).contexts[
            Visibility.WORKER
        ]
        for budget in (1000, 50)
    )

    assert [content for _role, content in everything] == ["x" * 400, "second", "third"]
    assert [content for _role, content in newest] == ["second", "third"]


def test_each_stage_reads_only_the_messages_its_visibility_bit_allows(alice, redis_queue):
    # docs/spec/sse-events-and-usage.md, section 8; the router's and the worker's context are
    # read in one query, and each keeps its own.
    from django.contrib.auth import get_user_model

    from agent_runs.models import Thread, Visibility
    from agent_runs.services.messages import MessageDraft, messages_append

    thread = Thread.objects.create(owner=get_user_model().objects.get(username="alice"))
    drafts = [
        MessageDraft(role=Message.Role.USER, message_id=f"m{mask}", content=name, visibility=mask)
        for name, mask in [
            ("for the router", Visibility.ROUTER),
            ("for the worker", Visibility.WORKER | Visibility.UI_HISTORY),
            ("for the screen", Visibility.UI_HISTORY),
            ("for both", Visibility.CONTEXT),
        ]
    ]
    messages_append(thread=thread, run=None, drafts=drafts)
    assert list(Message.objects.filter(thread=thread).values_list("seq", flat=True)) == [
        1,
        2,
        3,
        4,
    ]
    body = run_input(threadId=str(thread.id))
    post_run(alice, body)

    contexts = reads_of(body["runId"], [Visibility.ROUTER, Visibility.WORKER]).contexts

    assert [text for _role, text in contexts[Visibility.ROUTER]] == ["for the router", "for both"]
    assert [text for _role, text in contexts[Visibility.WORKER]] == ["for the worker", "for both"]


def test_a_job_reads_its_turn_in_one_go_the_context_before_the_message_it_answers(
    alice, redis_queue
):
    """``turn_reads``: the user's memory notes, the run's user message, and the earlier
    messages, only those before that message (a later run's are not its context)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agent_runs.models import Run, UserMemory, Visibility
    from agent_runs.selectors.context import turn_reads

    first = run_input(messages=[{"id": "m1", "role": "user", "content": "first"}])
    post_run(alice, first)
    second = run_input(
        threadId=first["threadId"], messages=[{"id": "m2", "role": "user", "content": "second"}]
    )
    post_run(alice, second)
    post_run(
        alice,
        run_input(
            threadId=first["threadId"], messages=[{"id": "m3", "role": "user", "content": "third"}]
        ),
    )
    run = Run.objects.select_related("thread").get(run_id=second["runId"])
    UserMemory.objects.create(owner_id=run.thread.owner_id, kind="fact", content="likes tea")

    with CaptureQueriesContext(connection) as queries:
        reads = turn_reads(
            user_run_pk=run.pk,
            thread_id=run.thread_id,
            user_id=run.thread.owner_id,
            memory_limit=10,
            consumers=[Visibility.ROUTER, Visibility.WORKER],
            token_budget=1000,
        )

    assert len(queries) == 3
    assert reads.user_message.content == "second" and reads.user_message.run_id == run.pk
    assert reads.memory_notes.endswith("fact: likes tea")
    for consumer in (Visibility.ROUTER, Visibility.WORKER):
        assert [text for _role, text in reads.contexts[consumer]] == ["first"]

    Message.objects.filter(run=run).delete()
    with pytest.raises(Message.DoesNotExist):
        turn_reads(
            user_run_pk=run.pk,
            thread_id=run.thread_id,
            user_id=run.thread.owner_id,
            memory_limit=10,
            consumers=[Visibility.WORKER],
            token_budget=1000,
        )
