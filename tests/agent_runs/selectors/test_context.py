"""What a run's stages read of their thread (``agent_runs/selectors/context.py``): the newest
turns that fit the budget, each stage only the messages its visibility bit allows."""

import pytest

from agent_runs.models import Message
from tests.conftest import post_run, run_input

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def test_context_keeps_the_newest_turns_that_fit_the_budget(alice, redis_queue):
    from agent_runs.models import Visibility
    from agent_runs.selectors.context import context_messages_for

    body = run_input(messages=[{"id": "m1", "role": "user", "content": "x" * 400}])
    post_run(alice, body)
    for index, text in enumerate(["second", "third"], start=2):
        post_run(
            alice,
            run_input(
                threadId=body["threadId"],
                messages=[{"id": f"m{index}", "role": "user", "content": text}],
            ),
        )
    last_seq = Message.objects.filter(thread_id=body["threadId"]).count() + 1

    everything, newest = (
        context_messages_for(
            thread_id=body["threadId"],
            before_seq=last_seq,
            consumers=[Visibility.WORKER],
            token_budget=budget,
        )[Visibility.WORKER]
        for budget in (1000, 50)
    )

    assert [content for _role, content in everything] == ["x" * 400, "second", "third"]
    assert [content for _role, content in newest] == ["second", "third"]


def test_each_stage_reads_only_the_messages_its_visibility_bit_allows(alice, redis_queue):
    # docs/spec/sse-events-and-usage.md, section 8; the router's and the worker's context are
    # read in one query, and each keeps its own.
    from django.contrib.auth import get_user_model

    from agent_runs.models import Thread, Visibility
    from agent_runs.selectors.context import context_messages_for
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

    contexts = context_messages_for(
        thread_id=thread.id,
        before_seq=thread.last_seq + 1,
        consumers=[Visibility.ROUTER, Visibility.WORKER],
        token_budget=1000,
    )

    assert [text for _role, text in contexts[Visibility.ROUTER]] == ["for the router", "for both"]
    assert [text for _role, text in contexts[Visibility.WORKER]] == ["for the worker", "for both"]
    assert list(Message.objects.filter(thread=thread).values_list("seq", flat=True)) == [
        1,
        2,
        3,
        4,
    ]
