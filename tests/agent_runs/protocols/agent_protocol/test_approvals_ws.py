"""Approvals on the Agent Protocol's WebSocket ``/ws`` (docs/protocols/agent-protocol-ws.md):
a run that stops on an approval sends the ``approval`` step's ``step.created`` and
``task.paused``, not ``task.completed``; the run that goes on with the answer sends the
approval's ``step.completed`` and ``task.resumed``, then runs to ``task.completed``. A replay
from any cursor sends what the live stream sent. A real socket against daphne, a real worker
in this process, the loopback model."""

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_runs.models import Interrupt
from tests.agent_runs.protocols.agent_protocol.test_approvals import STANDUP, Held
from tests.agent_runs.protocols.agent_protocol.test_ws_events import TaskSocket, completed
from tests.conftest import work_burst

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture
def connect(daphne_port: int) -> Iterator[Callable[..., TaskSocket]]:
    """Sockets of ``/ws``, each past its ``connected`` frame; closed after the test."""
    sockets: list[TaskSocket] = []

    def open_socket(**kwargs: Any) -> TaskSocket:
        sockets.append(TaskSocket(daphne_port, **kwargs))
        assert sockets[-1].next()["type"] == "connected"
        return sockets[-1]

    yield open_socket
    for socket in sockets:
        socket.close()


def paused(task_id: str) -> Any:
    return lambda frame: frame["type"] == "task.paused" and frame["task_id"] == task_id


@pytest.mark.parametrize("approved", [True, False], ids=["approved", "rejected"])
def test_an_approval_is_a_step_created_and_the_task_paused_then_resumed(
    alice, alice_token, fake_openai, redis_queue, connect, approved
):
    held = Held(
        alice, fake_openai, redis_queue, [("call_c1", "calendar_create", json.dumps(STANDUP))]
    )
    (interrupt,) = Interrupt.objects.all()
    socket = connect(bearer=alice_token)
    socket.subscribe(held.task_id)

    to_pause = socket.until(paused(held.task_id))
    to_pause += socket.quiet()  # nothing more: the held run's end is no completion

    types = [frame["type"] for frame in to_pause]
    assert types[:2] == ["task.created", "task.started"]
    assert types[-3:] == ["step.completed", "step.created", "task.paused"]
    assert "task.completed" not in types
    created, pause = to_pause[-2:]
    approval_step = alice.get(f"/api/tasks/{held.task_id}/steps").json()["steps"][-1]
    assert created["step_id"] == approval_step["step_id"] == held.step_id(interrupt)
    assert created["data"]["name"] == "approval"
    assert created["data"]["interrupt"]["id"] == interrupt.id
    assert created["data"]["interrupt"]["metadata"]["toolName"] == "calendar_create"
    assert pause["data"] == {
        "cycle_id": held.run.run_id,
        "reason": "approval",
        "interrupt_ids": [interrupt.id],
        "pending_tool_call_ids": [],
    }

    answered = held.answer(alice, interrupt.id, approved)
    assert answered.status_code == 200, answered.content
    work_burst(redis_queue)
    to_end = socket.until(completed(held.task_id))

    assert [frame["type"] for frame in to_end[:4]] == [
        "step.completed",
        "task.resumed",
        "task.started",
        "step.created",
    ]
    done, resumed, started = to_end[:3]
    assert done["step_id"] == held.step_id(interrupt)
    assert done["data"] == {
        "name": "approval",
        "interrupt_id": interrupt.id,
        "interrupt_status": "resolved",
        "approved": approved,
    }
    went_on = answered.json()["additional_output"]["answered_by"]
    assert resumed["data"] == {
        "cycle_id": went_on,
        "continues": held.run.run_id,
        "next_stage": "worker",
    }
    assert started["data"] == {"cycle_id": went_on}
    assert to_end[3]["data"] == {"name": "worker"}

    # A replay from any cursor sends what the live stream sent after it.
    live = to_pause + to_end
    resumed_at = len(to_pause)
    # From the task.paused frame, from the approval's step.completed (mid-event), and from
    # the worker's step.created.
    for cut in (resumed_at - 1, resumed_at, resumed_at + 3):
        again = connect(bearer=alice_token)
        again.subscribe(held.task_id, lastEventId=live[cut]["event_id"])
        assert again.until(completed(held.task_id)) == live[cut + 1 :]
