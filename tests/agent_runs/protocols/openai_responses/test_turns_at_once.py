"""Two turns of one conversation sent at the same instant (Django's test client in two
threads, let go together from the thread's row lock): ``run_create`` checks the turn under
that lock, so exactly one is accepted and the other gets the answer it would get second.
docs/protocols/openai-responses.md, Errors."""

from functools import partial
from typing import Any

import pytest
from rest_framework.test import APIClient

from agent_runs.models import Run
from agent_runs.services.tokens import api_token_create
from tests.agent_runs.concurrency import at_once_behind_lock

pytestmark = pytest.mark.django_db(transaction=True)

BUSY = "Another response is in progress for this conversation: wait for it to finish or cancel it."


@pytest.fixture
def token(redis_queue: Any) -> str:
    return api_token_create(username="alice")


def create(token: str, **body: Any) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    body = {"model": "gpt-test", "input": "Hello", "background": True, **body}
    return client.post("/openai/v1/responses", body, format="json")


def ended_response(token: str, **body: Any) -> Run:
    response = create(token, **body)
    assert response.status_code == 200, response.content
    run = Run.objects.get(run_id=response.json()["id"])
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    return run


def split(answers: list[Any]) -> tuple[Any, Any]:
    accepted = [answer for answer in answers if answer.status_code == 200]
    refused = [answer for answer in answers if answer.status_code != 200]
    assert len(accepted) == len(refused) == 1, answers
    return accepted[0], refused[0]


def test_two_turns_of_an_idle_conversation_at_once_one_is_refused_as_busy(token):
    first = ended_response(token, conversation="trip")

    answers = at_once_behind_lock(
        first.thread_id, [partial(create, token, conversation="trip") for _ in range(2)]
    )

    accepted, refused = split(answers)
    assert refused.status_code == 409
    assert refused.headers["x-should-retry"] == "false"
    assert refused.json() == {
        "error": {
            "message": BUSY,
            "type": "invalid_request_error",
            "param": "conversation",
            "code": "conversation_locked",
        }
    }
    runs = Run.objects.filter(thread_id=first.thread_id).order_by("pk")
    assert [run.run_id for run in runs] == [first.run_id, accepted.json()["id"]]


def test_two_turns_after_the_same_previous_response_at_once_one_is_a_fork(token):
    first = ended_response(token)

    answers = at_once_behind_lock(
        first.thread_id,
        [partial(create, token, previous_response_id=first.run_id) for _ in range(2)],
    )

    accepted, refused = split(answers)
    assert refused.status_code == 400
    assert refused.json() == {
        "error": {
            "message": f"Previous response '{first.run_id}' is not the latest response of its "
            "conversation: continue from the latest one.",
            "type": "invalid_request_error",
            "param": "previous_response_id",
            "code": "previous_response_not_latest",
        }
    }
    assert accepted.json()["previous_response_id"] == first.run_id
    assert Run.objects.filter(thread_id=first.thread_id).count() == 2


def test_a_turn_after_a_response_in_progress_is_busy_and_writes_nothing(token):
    first = create(token, conversation="trip").json()["id"]  # queued: in progress

    by_conversation = create(token, conversation="trip")
    by_previous = create(token, previous_response_id=first)

    assert by_conversation.status_code == by_previous.status_code == 409
    assert by_conversation.json()["error"]["param"] == "conversation"
    assert by_previous.json()["error"]["param"] == "previous_response_id"
    assert by_previous.json()["error"]["message"] == BUSY
    assert by_previous.headers["x-should-retry"] == "false"
    assert Run.objects.count() == 1
