"""Double texting on the Agent Protocol's official set: a step's ``input`` with
``additional_input.multitask`` while the task's run is still going, over real HTTP against
daphne, with a real worker on the demo model. docs/protocols/multitask.md."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runs.models import Message, Run
from tests.agent_runs.protocols.agent_protocol.test_step_wait import call, task_create
from tests.conftest import DEMO, serving

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture
def port(redis_queue: Any, tmp_path: Path) -> Iterator[int]:
    with serving(ATTACHMENT_STORAGE_ROOT=str(tmp_path / "attachments"), **DEMO) as port:
        yield port


def step(port: int, token: str, task_id: str, text: str, multitask: Any) -> tuple[int, Any]:
    body = {"input": text, "additional_input": {"multitask": multitask}}
    return call(port, token, "POST", f"/ap/v1/agent/tasks/{task_id}/steps", body)


def test_a_steps_input_with_multitask_makes_a_new_run_of_the_busy_task(port, alice_token):
    task_id = task_create(port, alice_token, "Write a poem")  # parked before its first stage

    unknown = step(port, alice_token, task_id, "Something else", "later")
    rejected = step(port, alice_token, task_id, "Something else", "reject")
    status, answered = step(port, alice_token, task_id, "Something else", "rollback")

    assert unknown[0] == 422
    assert "additional_input.multitask must be one of" in str(unknown[1])
    assert rejected[0] == 409
    assert status == 200, answered
    first, second = Run.objects.order_by("pk")
    assert first.status == Run.Status.CANCELLED and first.rolled_back
    assert second.multitask == "rollback"
    assert Message.objects.get(run=second, role="user").content == "Something else"
    assert answered["task_id"] == task_id
