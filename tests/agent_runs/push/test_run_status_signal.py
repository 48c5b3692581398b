"""``run_status_changed`` is sent inside the transaction that changed a run's status, so a
protocol edge's outbox rows commit and roll back with the change (agent_runs/signals.py)."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from agent_runs.models import PushConfig, PushDelivery, Run, Thread
from agent_runs.push.selectors import push_configs_for_run
from agent_runs.push.services import push_enqueue
from agent_runs.services.lifecycle import run_cancel, run_complete, run_pause
from agent_runs.services.run_claim import run_claim
from agent_runs.signals import run_status_changed, run_status_receivers_connect
from tests.conftest import post_run, run_input

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queued_run(alice: Any, redis_queue: Any, settings: Any) -> Run:
    settings.PUSH_ALLOW_PRIVATE_URLS = True
    body = run_input()
    post_run(alice, body)
    run = Run.objects.get(run_id=body["runId"])
    thread = Thread.objects.get(pk=run.thread_id)
    PushConfig.objects.create(
        owner=thread.owner,
        thread=thread,
        protocol="a2a",
        task_ref=str(thread.pk),
        url="http://127.0.0.1:9/hook",
        secret="s",
    )
    return run


@pytest.fixture
def pushing_receiver() -> Iterator[list[str]]:
    """A protocol edge's receiver: one outbox row per config of the run's thread."""
    heard: list[str] = []

    def receiver(sender: Any, run: Run, status: Run.Status, **kwargs: Any) -> None:
        assert transaction.get_connection().in_atomic_block
        heard.append(status)
        configs = push_configs_for_run(run=run, protocol="a2a")
        push_enqueue(configs=configs, body={"runId": run.run_id, "state": status})

    run_status_changed.connect(receiver, sender=Run)
    yield heard
    run_status_changed.disconnect(receiver, sender=Run)


def states() -> list[str]:
    return list(PushDelivery.objects.order_by("created_at").values_list("body__state", flat=True))


def test_each_status_change_writes_its_outbox_row_with_it(queued_run, pushing_receiver):
    token = run_claim(run_pk=queued_run.pk)
    assert token is not None
    assert run_complete(run=queued_run, claim_token=token)
    assert pushing_receiver == ["running", "completed"]
    assert states() == ["running", "completed"]


def test_a_receivers_rows_roll_back_with_the_change(queued_run, pushing_receiver):
    with pytest.raises(RuntimeError), transaction.atomic():
        run_pause(run=queued_run)
        assert states() == ["paused"]
        raise RuntimeError("the request failed after the pause")
    queued_run.refresh_from_db()
    assert queued_run.status == "queued"
    assert states() == []


def test_a_failing_receiver_undoes_the_change_it_was_told_of(queued_run):
    def receiver(**kwargs: Any) -> None:
        raise RuntimeError("cannot write the outbox")

    run_status_changed.connect(receiver, sender=Run)
    try:
        with pytest.raises(RuntimeError):
            run_claim(run_pk=queued_run.pk)
    finally:
        run_status_changed.disconnect(receiver, sender=Run)
    queued_run.refresh_from_db()
    assert (queued_run.status, queued_run.claim_token) == ("queued", None)
    assert run_claim(run_pk=queued_run.pk) is not None  # with no receiver, as before


def test_a_cancel_is_heard_once(queued_run, pushing_receiver):
    run_cancel(run=queued_run)
    run_cancel(run=queued_run)  # ended already: no change, nothing sent
    assert states() == ["cancelled"]


def record_status(sender: Any, run: Run, status: Run.Status, **kwargs: Any) -> None:
    """A receiver named by dotted path, as a protocol edge names its own."""
    heard_by_path.append(status)


heard_by_path: list[str] = []


def test_a_receiver_named_in_the_setting_is_connected_once(queued_run, settings):
    path = "tests.agent_runs.push.test_run_status_signal.record_status"
    settings.AGENT_RUN_STATUS_RECEIVERS = [path]
    try:
        run_status_receivers_connect()
        run_status_receivers_connect()  # a second ready() connects nothing more
        run_pause(run=queued_run)
    finally:
        run_status_changed.disconnect(sender=Run, dispatch_uid=path)
    assert heard_by_path == ["paused"]
