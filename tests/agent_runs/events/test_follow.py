"""The one replay + live merge: each event carries its id and its ordinal in its run, the
same whether it was replayed from PostgreSQL or read live from Redis."""

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from ag_ui.core import RunFinishedEvent, RunStartedEvent, StepFinishedEvent, StepStartedEvent
from django.contrib.auth import get_user_model

from agent_runs.events.emitter import RunEventEmitter
from agent_runs.events.follow import Event, thread_events
from agent_runs.events.reads import event_stream_start
from agent_runs.models import Run, RunEvent
from agent_runs.services.lifecycle import run_complete
from agent_runs.services.run_claim import run_claim
from tests.conftest import post_run, run_input

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def test_a_replay_and_the_live_stream_number_each_event_alike(alice, redis_queue):
    body = run_input()
    post_run(alice, body)
    run = Run.objects.get(run_id=body["runId"])
    token = run_claim(run_pk=run.pk)
    assert token is not None
    emitter = RunEventEmitter(run=run, claim_token=token, batch_window=0)
    ids = {"threadId": str(run.thread_id), "runId": run.run_id}
    emitter.emit(RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id))
    emitter.emit(StepStartedEvent(step_name="router", **ids))  # both replayed
    user = get_user_model().objects.get(username="alice")
    start = event_stream_start(user=user, thread_id=run.thread_id, after_id=None)
    received: list[Event] = []
    subscribed = threading.Event()

    async def follow() -> None:
        stream = thread_events(thread_id=run.thread_id, start=start, follow=False)
        async for batch in stream:
            received.extend(batch)
            subscribed.set()

    reader = threading.Thread(target=asyncio.run, args=(follow(),))
    reader.start()
    assert subscribed.wait(10)  # the replay is in: what follows is read live
    time.sleep(0.2)
    emitter.emit(StepFinishedEvent(step_name="router", **ids))
    emitter.emit(StepStartedEvent(step_name="worker", **ids))
    emitter.emit(StepFinishedEvent(step_name="worker", **ids))
    emitter.emit(RunFinishedEvent(thread_id=str(run.thread_id), run_id=run.run_id))
    assert run_complete(run=run, claim_token=token)
    reader.join(timeout=10)

    stored: list[tuple[Any, ...]] = list(
        RunEvent.objects.filter(run=run).order_by("id").values_list("id", "seq", "type", "payload")
    )
    # Replayed or live, an event's text is its stored JSON (framed by AG-UI as it is).
    assert [(e.id, e.seq, e.type, json.loads(e.data)) for e in received] == stored
    assert [(e.id, e.seq, e.payload["type"], e.payload) for e in received] == stored
    assert [seq for _id, seq, _type, _payload in stored] == [0, 1, 2, 3, 4, 5]
