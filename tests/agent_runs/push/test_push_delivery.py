"""The push outbox end to end: rows written with the caller's transaction, delivered by a
real RQ worker to a loopback receiver that checks the signature, retried with back-off from
the database, failed after the last attempt, and kept across a Redis flush (docs/push.md)."""

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import TestCase
from django.utils import timezone

from agent_runs.models import PushConfig, PushDelivery, Thread
from agent_runs.push.services import (
    LAST_ATTEMPT_LOST,
    REFUSED_PRIVATE,
    push_config_create,
    push_deliveries_enqueue_due,
    push_delivery_attempt,
    push_enqueue,
)
from tests.agent_runs.push.receiver import PushReceiver
from tests.conftest import start_worker, stop_process, wait_for, work_burst

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BODY = {"taskId": "task-1", "status": {"state": "completed"}, "note": "déjà vu"}


@pytest.fixture
def loopback_allowed(settings: Any) -> Any:
    settings.PUSH_ALLOW_PRIVATE_URLS = True
    settings.PUSH_RETRY_BASE_SECONDS = 0
    return settings


def config_for(receiver: PushReceiver, **fields: Any) -> PushConfig:
    alice = get_user_model().objects.get_or_create(username="alice")[0]
    thread = Thread.objects.create(owner=alice)
    config = push_config_create(
        thread=thread, protocol="a2a", task_ref="task-1", url=receiver.url, **fields
    )
    receiver.secret = config.secret
    return config


def enqueue(config: PushConfig) -> PushDelivery:
    with TestCase.captureOnCommitCallbacks(execute=True), transaction.atomic():
        (delivery,) = push_enqueue(configs=[config], body=BODY)
    assert delivery.next_attempt_at <= timezone.now()  # due at once, on the database's clock
    return delivery


def delivery_status(delivery: PushDelivery) -> str:
    delivery.refresh_from_db()
    return delivery.status


def test_a_delivery_arrives_signed_with_its_idempotency_key_and_the_clients_token(
    redis_queue, loopback_allowed
):
    with PushReceiver() as receiver:
        config = config_for(receiver, token="client-token", token_header="X-A2A-Notification-Token")
        delivery = enqueue(config)
        work_burst(redis_queue)

    (request,) = receiver.received
    assert request.signed
    assert request.body == BODY
    assert request.headers["x-push-delivery"] == str(delivery.pk)
    assert request.headers["x-a2a-notification-token"] == "client-token"
    assert request.headers["content-type"] == "application/json"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 1, 200)
    assert delivery.delivered_at is not None


def test_a_receiver_failing_twice_gets_three_attempts_with_one_key_and_one_delivery(
    redis_queue, loopback_allowed
):
    with PushReceiver(statuses=[503, 500]) as receiver:
        config = config_for(receiver)
        worker = start_worker(
            PUSH_ALLOW_PRIVATE_URLS="true",
            PUSH_RETRY_BASE_SECONDS="0",
            AGENT_RUN_SWEEP_SECONDS="5",
        )
        try:
            delivery = enqueue(config)
            wait_for(lambda: delivery_status(delivery) != "pending", seconds=60)
        finally:
            stop_process(worker)

    assert len(receiver.received) == 3
    assert all(request.signed for request in receiver.received)
    assert {request.headers["x-push-delivery"] for request in receiver.received} == {
        str(delivery.pk)
    }
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 3)
    assert PushDelivery.objects.filter(status="delivered").count() == 1


def test_a_delivery_that_never_succeeds_is_failed_with_its_last_error(
    redis_queue, loopback_allowed
):
    loopback_allowed.PUSH_MAX_ATTEMPTS = 2
    with PushReceiver(statuses=[500, 502], error_body=b"upstream down") as receiver:
        delivery = enqueue(config_for(receiver))
        work_burst(redis_queue)
        assert delivery_status(delivery) == "pending"
        assert push_deliveries_enqueue_due() == 1  # the retry, from the database
        work_burst(redis_queue)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 2)
    assert (delivery.last_status_code, delivery.last_error) == (502, "HTTP 502: upstream down")
    assert len(receiver.received) == 2
    assert push_deliveries_enqueue_due() == 0


def test_retries_back_off_exponentially(loopback_allowed):
    loopback_allowed.PUSH_RETRY_BASE_SECONDS = 10
    with PushReceiver(statuses=[500, 500]) as receiver:
        delivery = PushDelivery.objects.create(config=config_for(receiver), body=BODY)
        waits = []
        for _ in range(2):
            before = timezone.now()
            attempted = push_delivery_attempt(delivery_id=delivery.pk)
            assert attempted is not None
            waits.append((attempted.next_attempt_at - before).total_seconds())
            assert push_delivery_attempt(delivery_id=delivery.pk) is None  # not due yet
            PushDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=before)
    assert 9 < waits[0] < 11
    assert 19 < waits[1] < 21


def test_a_pending_delivery_survives_a_redis_flush(redis_queue, loopback_allowed):
    with PushReceiver() as receiver:
        delivery = enqueue(config_for(receiver))
        redis_queue.connection.flushdb()  # its job is gone; the row is the truth
        worker = start_worker(PUSH_ALLOW_PRIVATE_URLS="true")
        try:
            wait_for(lambda: delivery_status(delivery) == "delivered", seconds=60)
        finally:
            stop_process(worker)
    assert len(receiver.received) == 1
    assert receiver.received[0].signed


def test_rolled_back_outbox_rows_are_never_sent(redis_queue, loopback_allowed):
    with PushReceiver() as receiver:
        config = config_for(receiver)
        with pytest.raises(RuntimeError), transaction.atomic():
            push_enqueue(configs=[config], body=BODY)
            raise RuntimeError("the state change failed")
        work_burst(redis_queue)
    assert not PushDelivery.objects.exists()
    assert receiver.received == []


def test_a_url_that_became_private_is_refused_at_delivery(redis_queue, loopback_allowed):
    with PushReceiver() as receiver:
        delivery = PushDelivery.objects.create(config=config_for(receiver), body=BODY)
        loopback_allowed.PUSH_ALLOW_PRIVATE_URLS = False  # as a host rebound to 127.0.0.1 is
        push_delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.last_error == f"push notification URL refused: {REFUSED_PRIVATE}"
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, None)
    assert receiver.received == []


def test_a_worker_that_died_mid_attempt_leaves_the_delivery_due_after_its_lease(
    loopback_allowed,
):
    with PushReceiver() as receiver:
        delivery = PushDelivery.objects.create(config=config_for(receiver), body=BODY)
        # An attempt claimed by a worker that then died: leased, not yet due.
        PushDelivery.objects.filter(pk=delivery.pk).update(
            attempts=1, next_attempt_at=timezone.now() + timedelta(seconds=40)
        )
        assert push_delivery_attempt(delivery_id=delivery.pk) is None
        PushDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
        attempted = push_delivery_attempt(delivery_id=delivery.pk)
    assert attempted is not None
    assert (attempted.status, attempted.attempts) == ("delivered", 2)
    assert len(receiver.received) == 1


def test_a_redirect_is_a_failed_attempt_and_is_not_followed(loopback_allowed):
    with PushReceiver() as elsewhere, PushReceiver(statuses=[302]) as receiver:
        receiver.redirect_to = elsewhere.url
        delivery = PushDelivery.objects.create(config=config_for(receiver), body=BODY)
        attempted = push_delivery_attempt(delivery_id=delivery.pk)
    assert attempted is not None
    assert (attempted.status, attempted.last_status_code) == ("pending", 302)
    assert len(receiver.received) == 1
    assert elsewhere.received == []


def test_two_workers_never_send_the_same_attempt_at_once(loopback_allowed):
    with PushReceiver(delay=0.5) as receiver:
        delivery = PushDelivery.objects.create(config=config_for(receiver), body=BODY)
        results: list[Any] = []

        def attempt() -> None:
            results.append(push_delivery_attempt(delivery_id=delivery.pk))
            connection.close()

        threads = [threading.Thread(target=attempt) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(receiver.received) == 1
    assert sorted(result is None for result in results) == [False, True, True, True]


def test_a_last_attempt_whose_worker_died_is_failed_by_the_sweep(redis_queue, loopback_allowed):
    loopback_allowed.PUSH_MAX_ATTEMPTS = 2
    with PushReceiver() as receiver:
        delivery = PushDelivery.objects.create(config=config_for(receiver), body=BODY)
        # Attempt 2 of 2 was claimed, then its worker died: its lease has run out.
        PushDelivery.objects.filter(pk=delivery.pk).update(attempts=2)
        assert push_delivery_attempt(delivery_id=delivery.pk) is None
        assert push_deliveries_enqueue_due() == 0
    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_error) == ("failed", LAST_ATTEMPT_LOST)
    assert receiver.received == []
