"""Two follow-up messages to a task that asked for input, sent at the same instant (Django's
test client in two threads, let go together from the thread's row lock): ``run_create``
checks under that lock that the run that asked is still the task's latest, so exactly one
continues the task and the other gets the error it would get second (``-32004``, the task
is still working). docs/protocols/a2a.md, Methods."""

import json
import uuid
from functools import partial
from typing import Any

import pytest
from rest_framework.test import APIClient

from agent_runs.models import Message, Run, RunEvent
from agent_runs.services.tokens import api_token_create
from tests.agent_runs.concurrency import at_once_behind_lock

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token(redis_queue: Any) -> str:
    return api_token_create(username="alice")


def send(token: str, text: str, **message: Any) -> dict[str, Any]:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
                **message,
            },
            "configuration": {"returnImmediately": True},
        },
    }
    response = client.generic(
        "POST", "/a2a", json.dumps(body), content_type="application/json", HTTP_A2A_VERSION="1.0"
    )
    assert response.status_code == 200, response.content
    answer: dict[str, Any] = response.json()
    return answer


def task_asking_for_input(token: str) -> Run:
    """A task whose run ended with a question (its journal as a worker writes it)."""
    task = send(token, "Add a meeting")["result"]["task"]
    run = Run.objects.get(run_id=task["id"])
    ids = {"threadId": str(run.thread_id), "runId": run.run_id}
    journal = [
        {"type": "RUN_STARTED", **ids},
        {"type": "TEXT_MESSAGE_START", "messageId": "answer", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "answer", "delta": "Which calendar?"},
        {"type": "TEXT_MESSAGE_END", "messageId": "answer", "resultType": "clarification"},
        {"type": "RUN_FINISHED", **ids},
    ]
    for seq, payload in enumerate(journal):
        RunEvent.objects.create(
            thread_id=run.thread_id, run=run, seq=seq, type=payload["type"], payload=payload
        )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    return run


def test_two_follow_ups_at_once_one_continues_the_task_the_other_is_refused(token):
    task = task_asking_for_input(token)

    answers = at_once_behind_lock(
        task.thread_id,
        [partial(send, token, f"The work one ({n})", taskId=task.run_id) for n in (1, 2)],
    )

    accepted = [answer for answer in answers if "result" in answer]
    refused = [answer for answer in answers if "error" in answer]
    assert len(accepted) == len(refused) == 1, answers
    continued = accepted[0]["result"]["task"]
    assert continued["id"] == task.run_id
    assert continued["status"]["state"] == "TASK_STATE_SUBMITTED"
    error = refused[0]["error"]
    assert error["code"] == -32004
    assert error["message"] == (
        f"Task {task.run_id} is still working (TASK_STATE_SUBMITTED): only a task that asked "
        "for input takes a follow-up message"
    )
    runs = Run.objects.filter(thread_id=task.thread_id).order_by("pk")
    assert [run.parent_run_id for run in runs] == ["", task.run_id]
    assert Message.objects.filter(thread_id=task.thread_id).count() == 2


def test_a_follow_up_to_a_task_still_working_is_refused_before_anything_is_written(token):
    task = task_asking_for_input(token)
    send(token, "The work one", taskId=task.run_id)  # queued: the task is submitted again

    again = send(token, "The other one", taskId=task.run_id)

    assert again["error"]["code"] == -32004
    assert "is still working (TASK_STATE_SUBMITTED)" in again["error"]["message"]
    assert Run.objects.filter(thread_id=task.thread_id).count() == 2
