"""A user's own webhook (docs/push.md, "The user's webhook"): a run of alice's that stops on
an approval posts ``interrupt.opened`` with the interrupt as ``GET
/api/v1/agent/interrupts/{id}`` answers it, signed with her profile's secret, through the
outbox (a real RQ worker, a loopback receiver that checks the signature), retried when the
receiver fails; bob's webhook never hears of alice's runs; and staff set it in the admin."""

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from agent_runs.models import PushDelivery, UserProfile
from agent_runs.push.services import (
    REFUSED_PRIVATE,
    WEBHOOK_REMOVED,
    push_deliveries_enqueue_due,
    push_enqueue_to_user,
)
from agent_runs.services.webhooks import user_webhook_set
from tests.agent_runs.protocols.agui.test_interrupt_rules import STANDUP, Interrupted
from tests.agent_runs.push.receiver import PushReceiver
from tests.conftest import work_burst

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

CALENDAR_CREATE = [("call_c1", "calendar_create", json.dumps(STANDUP))]


@pytest.fixture
def loopback_allowed(settings: Any) -> Any:
    settings.PUSH_ALLOW_PRIVATE_URLS = True
    settings.PUSH_RETRY_BASE_SECONDS = 0
    return settings


def webhook_of(username: str, receiver: PushReceiver) -> UserProfile:
    user = get_user_model().objects.get_or_create(username=username)[0]
    profile = UserProfile.objects.get_or_create(user=user)[0]
    user_webhook_set(profile=profile, url=receiver.url)
    receiver.secret = profile.webhook_secret
    return profile


def test_a_run_stopping_on_an_approval_posts_the_interrupt_to_its_owners_webhook(
    alice, fake_openai, redis_queue, loopback_allowed
):
    with PushReceiver() as receiver:
        profile = webhook_of("alice", receiver)
        thread = Interrupted(alice, fake_openai, redis_queue, CALENDAR_CREATE)
        (interrupt,) = thread.interrupts
        # What the API answers for it while it is pending: the webhook's interrupt, exactly.
        read = alice.get(f"/api/v1/agent/interrupts/{interrupt.id}")

    (request,) = receiver.received
    assert request.signed
    assert request.body == {"type": "interrupt.opened", "interrupt": read.json()}
    assert request.body["interrupt"]["status"] == "pending"
    assert request.body["interrupt"]["toolName"] == "calendar_create"
    assert request.body["interrupt"]["arguments"] == STANDUP
    delivery = PushDelivery.objects.get()
    assert (delivery.profile_id, delivery.config_id) == (profile.pk, None)
    assert (delivery.status, delivery.attempts) == ("delivered", 1)
    assert request.headers["x-push-delivery"] == str(delivery.pk)


def test_parallel_calls_give_one_delivery_each(alice, fake_openai, redis_queue, loopback_allowed):
    calls = [
        ("call_c1", "calendar_create", json.dumps(STANDUP)),
        ("call_c2", "calendar_create", json.dumps({**STANDUP, "title": "Retro"})),
    ]
    with PushReceiver() as receiver:
        webhook_of("alice", receiver)
        thread = Interrupted(alice, fake_openai, redis_queue, calls)

    assert len(thread.interrupts) == 2
    told = sorted(request.body["interrupt"]["id"] for request in receiver.received)
    assert told == sorted(interrupt.id for interrupt in thread.interrupts)
    assert all(request.signed for request in receiver.received)
    assert len({request.headers["x-push-delivery"] for request in receiver.received}) == 2


def test_a_failing_webhook_is_retried_with_the_same_delivery_id(
    alice, fake_openai, redis_queue, loopback_allowed
):
    with PushReceiver(fail_each=1) as receiver:
        webhook_of("alice", receiver)
        Interrupted(alice, fake_openai, redis_queue, CALENDAR_CREATE)
        delivery = PushDelivery.objects.get()
        assert (delivery.status, delivery.last_error) == ("pending", "HTTP 503: receiver says no")

        assert push_deliveries_enqueue_due() == 1  # the retry, from the database
        work_burst(redis_queue)

    first, second = receiver.received
    assert first.headers["x-push-delivery"] == second.headers["x-push-delivery"]
    assert second.signed and second.body == first.body
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)


def test_only_the_owners_webhook_hears_of_a_run_and_none_without_one(
    alice, bob, fake_openai, redis_queue, loopback_allowed
):
    with PushReceiver() as bobs:
        webhook_of("bob", bobs)
        Interrupted(alice, fake_openai, redis_queue, CALENDAR_CREATE)

    assert bobs.received == []
    assert not PushDelivery.objects.exists()


def test_a_webhook_removed_before_its_delivery_fails_the_attempt_and_sends_nothing(
    redis_queue, loopback_allowed
):
    loopback_allowed.PUSH_MAX_ATTEMPTS = 1
    with PushReceiver() as receiver:
        profile = webhook_of("alice", receiver)
        (delivery,) = push_enqueue_to_user(profile=profile, bodies=[{"type": "interrupt.opened"}])
        user_webhook_set(profile=profile, url="")
        work_burst(redis_queue)

    assert receiver.received == []
    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_error) == ("failed", WEBHOOK_REMOVED)


def test_staff_set_a_webhook_in_the_admin_and_its_secret_is_made_and_kept(staff_client, settings):
    settings.PUSH_ALLOW_PRIVATE_URLS = False
    alice = get_user_model().objects.create_user("alice")
    profile = UserProfile.objects.create(user=alice)
    page = f"/admin/agent_runs/userprofile/{profile.pk}/change/"
    form = {"user": alice.pk, "settings": "{}", "webhook_secret": ""}

    refused = staff_client.post(page, {**form, "webhook_url": "http://127.0.0.1:9/hook"})
    assert refused.status_code == 200
    assert f"push notification URL refused: {REFUSED_PRIVATE}" in refused.content.decode()
    profile.refresh_from_db()
    assert profile.webhook_url == ""

    settings.PUSH_ALLOW_PRIVATE_URLS = True
    saved = staff_client.post(page, {**form, "webhook_url": "http://127.0.0.1:9/hook"})
    assert saved.status_code == 302
    profile.refresh_from_db()
    assert profile.webhook_url == "http://127.0.0.1:9/hook"
    made = profile.webhook_secret
    assert len(made) >= 40

    # Saved again with the secret left blank, it keeps the one it has; a new one replaces it.
    staff_client.post(page, {**form, "webhook_url": "http://127.0.0.1:9/other"})
    profile.refresh_from_db()
    assert (profile.webhook_url, profile.webhook_secret) == ("http://127.0.0.1:9/other", made)
    staff_client.post(page, {**form, "webhook_url": profile.webhook_url, "webhook_secret": "s2"})
    profile.refresh_from_db()
    assert profile.webhook_secret == "s2"
