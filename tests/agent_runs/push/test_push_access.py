"""Every config and delivery belongs to the thread's owner: a stranger reads nothing (404),
and staff see the outbox in the admin."""

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.http import Http404

from agent_runs.models import PushDelivery, Thread
from agent_runs.push.selectors import (
    push_config_get_for_task,
    push_config_get_for_user,
    push_configs_for_task,
    push_deliveries_for_config,
)
from agent_runs.push.services import push_config_create, push_config_delete

pytestmark = pytest.mark.django_db


@pytest.fixture
def alices_config(settings):
    settings.PUSH_ALLOW_PRIVATE_URLS = True
    alice = get_user_model().objects.create(username="alice")
    thread = Thread.objects.create(owner=alice)
    return push_config_create(
        thread=thread, protocol="a2a", task_ref="task-1", url="http://127.0.0.1:9/hook"
    )


def test_a_config_belongs_to_the_threads_owner_and_gets_a_secret(alices_config):
    assert alices_config.owner.username == "alice"
    assert len(alices_config.secret) >= 40


def test_registering_the_same_config_again_replaces_its_url_and_keeps_its_secret(alices_config):
    again = push_config_create(
        thread=alices_config.thread,
        protocol="a2a",
        task_ref="task-1",
        url="http://127.0.0.1:10/new",
    )
    assert (again.pk, again.url, again.secret) == (
        alices_config.pk,
        "http://127.0.0.1:10/new",
        alices_config.secret,
    )


def test_a_stranger_reads_none_of_it(alices_config):
    alice = alices_config.owner
    bob = get_user_model().objects.create(username="bob")
    PushDelivery.objects.create(config=alices_config, body={})
    assert push_config_get_for_user(user=alice, config_id=alices_config.pk) == alices_config
    with pytest.raises(Http404):
        push_config_get_for_user(user=bob, config_id=alices_config.pk)
    with pytest.raises(Http404):
        push_config_get_for_user(user=alice, config_id=uuid.uuid4())
    assert list(push_configs_for_task(user=bob, protocol="a2a", task_ref="task-1")) == []
    mine = push_config_get_for_task(user=alice, protocol="a2a", task_ref="task-1")
    assert mine == alices_config
    with pytest.raises(Http404):
        push_config_get_for_task(user=bob, protocol="a2a", task_ref="task-1")
    assert push_deliveries_for_config(user=bob, config_id=alices_config.pk).count() == 0
    assert push_deliveries_for_config(user=alice, config_id=alices_config.pk).count() == 1


def test_deleting_a_config_drops_its_deliveries(alices_config):
    PushDelivery.objects.create(config=alices_config, body={})
    push_config_delete(config=alices_config)
    assert not PushDelivery.objects.exists()


def test_staff_see_failed_deliveries_with_their_last_error_and_can_retry(
    alices_config, client, redis_queue
):
    staff = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw-12345!")
    client.force_login(staff)
    failed = PushDelivery.objects.create(
        config=alices_config,
        body={},
        status=PushDelivery.Status.FAILED,
        attempts=8,
        last_error="HTTP 500: receiver down",
        last_status_code=500,
    )
    PushDelivery.objects.create(config=alices_config, body={})

    page = client.get("/admin/agent_runs/pushdelivery/", {"status__exact": "failed"})
    assert page.status_code == 200
    assert page.context["cl"].result_count == 1
    assert "HTTP 500: receiver down" in page.content.decode()
    config_page = client.get(f"/admin/agent_runs/pushconfig/{alices_config.pk}/change/")
    assert config_page.status_code == 200
    assert alices_config.secret not in config_page.content.decode()

    client.post(
        "/admin/agent_runs/pushdelivery/",
        {"action": "retry_now", "_selected_action": [str(failed.pk)]},
    )
    failed.refresh_from_db()
    assert (failed.status, failed.attempts) == (PushDelivery.Status.PENDING, 7)  # one more
