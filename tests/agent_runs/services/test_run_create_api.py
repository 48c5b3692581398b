import pytest

from agent_runs.models import Message, Run, Thread
from tests.conftest import post_run, run_input

pytestmark = pytest.mark.django_db


def test_it_accepts_a_run_and_stores_thread_message_and_run(alice, redis_queue):
    body = run_input()
    response = post_run(alice, body)
    assert response.status_code == 202, response.content
    data = response.json()
    assert data["threadId"] == body["threadId"]
    assert data["runId"] == body["runId"]
    assert data["created"] is True
    run = Run.objects.get(run_id=body["runId"])
    assert str(run.task_id) == data["taskId"]
    assert run.status == Run.Status.QUEUED
    assert Thread.objects.get(pk=body["threadId"]).owner.username == "alice"
    message = Message.objects.get(run=run)
    assert (message.seq, message.role, message.content) == (1, "user", "What is on my calendar?")
