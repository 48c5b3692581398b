import uuid

import pytest

from agent_runs.models import Message, Run, RunEvent, Thread
from tests.conftest import post_run, run_input, send

pytestmark = pytest.mark.django_db


def test_retrying_the_same_run_answers_the_same_response_without_a_second_run(alice, redis_queue):
    body = run_input()
    first = post_run(alice, body)
    retry = post_run(alice, body)
    assert first.status_code == retry.status_code == 202
    assert retry.json() == first.json()
    assert retry.json()["created"] is True  # the same answer as the first time
    assert Run.objects.count() == 1
    assert Message.objects.count() == 1
    assert redis_queue.job_ids == [first.json()["taskId"]]


def test_a_retry_in_snake_case_is_the_same_request(alice, redis_queue):
    body = run_input()
    first = post_run(alice, body)
    snake = {
        "thread_id": body["threadId"],
        "run_id": body["runId"],
        "state": {},
        "messages": body["messages"],
        "tools": [],
        "context": [],
        "forwarded_props": body["forwardedProps"],
    }
    retry = post_run(alice, snake)
    assert retry.status_code == 202
    assert retry.json() == first.json()
    assert Run.objects.count() == 1


def test_the_same_run_id_with_a_different_body_is_a_conflict(alice, redis_queue):
    body = run_input()
    post_run(alice, body)
    changed = dict(body, messages=[{"id": "msg-001", "role": "user", "content": "Something else"}])
    response = post_run(alice, changed)
    assert response.status_code == 409
    assert response.json() == {
        "detail": "runId already exists in this thread with a different RunAgentInput"
    }
    assert Run.objects.count() == 1
    assert Message.objects.count() == 1


def test_a_second_run_on_the_thread_is_not_a_new_thread(alice, redis_queue):
    body = run_input()
    post_run(alice, body)
    second = post_run(alice, run_input(threadId=body["threadId"], runId="run-second"))
    assert second.status_code == 202
    assert second.json()["created"] is False
    assert list(Message.objects.order_by("seq").values_list("seq", flat=True)) == [1, 2]


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
def test_a_user_message_id_the_thread_already_has_is_a_conflict_and_writes_nothing(
    alice, redis_queue, accept
):
    first = run_input(messages=[{"id": "msg-1", "role": "user", "content": "Hello"}])
    accepted = post_run(alice, first)
    again = run_input(threadId=first["threadId"], messages=first["messages"])  # a new runId

    response = send(
        lambda: alice.post("/api/v1/agent/runs", again, format="json", HTTP_ACCEPT=accept)
    )

    assert response.status_code == 409
    assert response.json() == {
        "detail": 'RunAgentInput.messages: the new user message "msg-1" is already in this thread'
    }
    assert list(Run.objects.values_list("run_id", flat=True)) == [first["runId"]]
    assert list(Message.objects.values_list("message_id", flat=True)) == ["msg-1"]
    assert not RunEvent.objects.exists()
    assert redis_queue.job_ids == [accepted.json()["taskId"]]


def test_a_user_message_id_of_another_thread_is_accepted(alice, redis_queue):
    first = run_input(messages=[{"id": "msg-1", "role": "user", "content": "Hello"}])
    post_run(alice, first)

    response = post_run(alice, run_input(messages=first["messages"]))  # a new thread

    assert response.status_code == 202
    assert Message.objects.filter(message_id="msg-1").count() == 2


def test_a_stranger_posting_to_alices_thread_gets_404_and_writes_nothing(alice, bob, redis_queue):
    body = run_input()
    post_run(alice, body)
    response = post_run(bob, run_input(threadId=body["threadId"], runId="bobs-run"))
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}
    assert Run.objects.count() == 1
    assert Thread.objects.get(pk=body["threadId"]).owner.username == "alice"


def test_a_stranger_gets_the_same_404_for_alices_thread_as_for_a_conflicting_retry(
    alice, bob, redis_queue
):
    body = run_input()
    post_run(alice, body)
    # Even replaying alice's exact body reveals nothing about her run.
    response = post_run(bob, body)
    assert response.status_code == 404
    assert "runId" not in response.content.decode()


def test_an_inactive_users_token_is_refused(alice, alice_token, redis_queue):
    from django.contrib.auth import get_user_model

    get_user_model().objects.filter(username="alice").update(is_active=False)
    response = post_run(alice, run_input(threadId=str(uuid.uuid4())))
    assert response.status_code == 401
    assert Run.objects.count() == 0
