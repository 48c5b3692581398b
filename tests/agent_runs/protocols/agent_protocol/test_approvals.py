"""Approvals on the Agent Protocol's spec set (docs/protocols/agent-protocol.md, Approvals):
a task whose run stopped on a tool call waiting for approval is ``paused`` with an
``approval`` step ``created`` (the interrupt in its ``additional_output``); a step (or a
resume) whose ``additional_input`` is ``{interruptId, approved, …}`` answers it and the task
goes on. Wrong or late answers are the spec's error shape with nothing written; an approval
answered elsewhere is closed here; two answers at once, one here and one through the core,
exactly one wins; expiry fails the step and the task. Django's test client, a real RQ worker
in this process, the loopback model."""

import json
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from agent_runs.errors import InterruptClosed
from agent_runs.models import CalendarEvent, Interrupt, Run, Step, Thread
from agent_runs.protocols.agent_protocol.outbound import approval_step_id
from agent_runs.services.interrupts import interrupt_answer, interrupts_expire
from agent_runs.services.run_request import run_step_budget
from tests.agent_runs.concurrency import at_once_behind_lock
from tests.conftest import send, work_burst
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}


class Held:
    """A spec-set task of alice's whose run stopped on approvals of ``calls``."""

    def __init__(self, client: Any, model: FakeOpenAI, queue: Any, calls: list[Any]) -> None:
        model.tool_call_turns = [calls]
        model.answer = ["Done."]
        created = send(
            lambda: client.post(
                "/api/tasks", {"task": "Put a standup in my calendar"}, format="json"
            )
        )
        assert created.status_code == 200, created.content
        self.task_id = created.json()["agent"]["id"]
        work_burst(queue)
        self.run = Run.objects.get(thread_id=self.task_id)
        self.interrupts = list(Interrupt.objects.filter(run=self.run).order_by("created_at"))
        self.queue = queue

    def post(self, client: Any, path: str, body: Any = None) -> Any:
        url = f"/api/tasks/{self.task_id}{path}"
        return send(lambda: client.post(url, body, format="json"))

    def answer(self, client: Any, interrupt_id: str, approved: Any = True, **extra: Any) -> Any:
        answer = {"interruptId": interrupt_id, "approved": approved, **extra}
        return self.post(client, "/steps", {"additional_input": answer})

    def step_id(self, interrupt: Interrupt) -> str:
        return str(
            approval_step_id(
                thread_id=self.task_id, run_id=self.run.run_id, interrupt_id=interrupt.id
            )
        )


@pytest.fixture
def held(alice, fake_openai, redis_queue) -> Held:
    return Held(
        alice, fake_openai, redis_queue, [("call_c1", "calendar_create", json.dumps(STANDUP))]
    )


def error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body: dict[str, Any] = response.json()
    assert set(body) <= {"error", "message", "details"} and body["error"] and body["message"]
    return body


def nothing_written(held: Held) -> None:
    assert list(Run.objects.values_list("pk", flat=True)) == [held.run.pk]
    assert set(Interrupt.objects.values_list("status", flat=True)) == {"pending"}
    assert list(Step.objects.values_list("name", flat=True)) == ["router", "worker"]
    assert not CalendarEvent.objects.exists()


def steps_of(client: Any, task_id: str) -> list[dict[str, Any]]:
    listed = client.get(f"/api/tasks/{task_id}/steps").json()
    assert listed["pagination"]["total"] == len(listed["steps"])
    steps: list[dict[str, Any]] = listed["steps"]
    return steps


def test_a_task_waiting_on_an_approval_is_paused_with_an_approval_step(alice, held):
    (interrupt,) = held.interrupts

    task = alice.get(f"/api/tasks/{held.task_id}").json()
    steps = steps_of(alice, held.task_id)

    assert task["status"] == "paused"
    assert [cycle["status"] for cycle in task["cycles"]] == ["paused"]
    assert [step["name"] for step in steps] == ["router", "worker", "approval"]
    _router, worker, approval = steps
    assert worker["is_last"] is False  # the approval follows it
    assert approval["step_id"] == held.step_id(interrupt)
    assert approval["status"] == "created" and approval["source"] == "agent"
    assert approval["is_last"] is False and approval["additional_input"] == {}
    assert "calendar_create" in approval["output"] and interrupt.id in approval["output"]
    shown = approval["additional_output"]["interrupt"]
    assert shown["id"] == interrupt.id and shown["toolCallId"] == "call_c1"
    assert shown["metadata"] == {"toolName": "calendar_create", "arguments": STANDUP}
    assert shown["responseSchema"]["required"] == ["approved"]
    assert approval["additional_output"]["interrupt_status"] == "pending"
    assert approval["created_at"] and approval["completed_at"] is None
    assert alice.get(f"/api/tasks/{held.task_id}/steps/{approval['step_id']}").json() == approval
    listed = alice.get(f"/api/tasks/{held.task_id}/steps/{approval['step_id']}/artifacts")
    assert listed.json()["artifacts"] == []
    # A page boundary between the stages and the approval.
    page = alice.get(f"/api/tasks/{held.task_id}/steps?page=2&pageSize=2").json()
    assert [step["step_id"] for step in page["steps"]] == [approval["step_id"]]
    assert page["pagination"] == {"total": 3, "page": 2, "pageSize": 2, "totalPages": 2}


@pytest.mark.parametrize("approved", [True, False], ids=["approved", "rejected"])
def test_a_step_answering_the_approval_lets_the_task_go_on(alice, held, approved):
    (interrupt,) = held.interrupts

    answered = held.answer(alice, interrupt.id, approved, reason="fine")

    assert answered.status_code == 200, answered.content
    step = answered.json()
    assert step["step_id"] == held.step_id(interrupt) and step["status"] == "completed"
    assert step["additional_input"] == {
        "interruptId": interrupt.id,
        "approved": approved,
        "reason": "fine",
    }
    assert step["additional_output"]["interrupt_status"] == "resolved"
    assert alice.get(f"/api/tasks/{held.task_id}").json()["status"] == "running"
    went_on = Run.objects.exclude(pk=held.run.pk).get()
    assert went_on.continues_id == held.run.pk and run_step_budget(went_on) is None
    assert step["additional_output"]["answered_by"] == went_on.run_id

    work_burst(held.queue)

    task = alice.get(f"/api/tasks/{held.task_id}").json()
    assert task["status"] == "completed"
    assert [cycle["status"] for cycle in task["cycles"]] == ["completed", "completed"]
    steps = steps_of(alice, held.task_id)
    assert [s["name"] for s in steps] == ["router", "worker", "approval", "worker", "memory"]
    assert steps[3]["output"] == "Done." and steps[-1]["is_last"] is True
    tools = steps[3]["additional_output"]["tool_calls"]
    assert [tool["id"] for tool in tools] == ["call_c1"]
    assert CalendarEvent.objects.exists() == approved


def test_the_resume_route_answers_the_approval_too(alice, held):
    (interrupt,) = held.interrupts
    bare = error(held.post(alice, "/resume"), 409)
    assert interrupt.id in bare["message"] and "additional_input" in bare["message"]
    nothing_written(held)

    answer = {"interruptId": interrupt.id, "approved": True}
    resumed = held.post(alice, "/resume", {"additional_input": answer})

    assert resumed.status_code == 200, resumed.content
    assert resumed.json() == {"task_id": held.task_id, "status": "running"}
    work_burst(held.queue)
    assert alice.get(f"/api/tasks/{held.task_id}").json()["status"] == "completed"
    assert CalendarEvent.objects.get().title == "Standup"


def test_parallel_approvals_are_steps_answered_one_at_a_time(alice, fake_openai, redis_queue):
    calls = [
        ("call_c1", "calendar_create", json.dumps(STANDUP)),
        ("call_c2", "calendar_create", json.dumps({**STANDUP, "title": "Retro"})),
    ]
    held = Held(alice, fake_openai, redis_queue, calls)
    first, second = held.interrupts
    steps = steps_of(alice, held.task_id)
    assert [s["name"] for s in steps] == ["router", "worker", "approval", "approval"]

    one = held.answer(alice, first.id, True)
    assert one.status_code == 200 and one.json()["status"] == "completed"
    assert alice.get(f"/api/tasks/{held.task_id}").json()["status"] == "paused"  # one left
    assert Run.objects.count() == 1
    two = held.answer(alice, second.id, False)
    assert two.status_code == 200 and two.json()["status"] == "completed"
    work_burst(redis_queue)

    assert alice.get(f"/api/tasks/{held.task_id}").json()["status"] == "completed"
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == ["Standup"]


def test_wrong_answers_are_refused_in_the_spec_shape_and_write_nothing(alice, bob, held):
    (interrupt,) = held.interrupts
    other_id = Thread.objects.create(owner=interrupt.thread.owner).pk  # another task of alice's

    unknown = error(held.answer(alice, "int-unknown"), 404)
    stranger = error(held.answer(bob, interrupt.id), 404)
    other = error(
        send(
            lambda: alice.post(
                f"/api/tasks/{other_id}/steps",
                {"additional_input": {"interruptId": interrupt.id, "approved": True}},
                format="json",
            )
        ),
        404,
    )
    not_bool = error(held.answer(alice, interrupt.id, "yes"), 400)
    bad_arguments = error(held.answer(alice, interrupt.id, arguments={"title": 3}), 422)
    cancel = error(held.post(alice, "/cancel"), 409)
    pause = error(held.post(alice, "/pause"), 409)

    assert unknown == {"error": "Not Found", "message": 'interrupt "int-unknown" not found'}
    assert stranger["message"] == "task not found"
    assert other["message"] == f'interrupt "{interrupt.id}" not found'
    assert not_bool["details"] == [
        {"field": "additional_input.approved", "problem": "Input should be a valid boolean"}
    ]
    assert bad_arguments["error"] == "Unprocessable Entity"
    assert "payload.arguments" in bad_arguments["message"]
    assert interrupt.id in cancel["message"]
    assert pause["message"] == "the task is not running (it is paused)"
    nothing_written(held)


def test_an_approval_answered_elsewhere_is_closed_here(alice, held):
    (interrupt, *_) = held.interrupts
    owner = get_user_model().objects.get(username="alice")
    _closed, went_on = interrupt_answer(
        user=owner, interrupt_id=interrupt.id, payload={"approved": True}
    )
    assert went_on is not None

    late = error(held.answer(alice, interrupt.id, False), 409)

    assert late["message"] == f'interrupt "{interrupt.id}" is not open: it is resolved'
    step = alice.get(f"/api/tasks/{held.task_id}/steps/{held.step_id(interrupt)}").json()
    assert step["status"] == "completed"
    assert step["additional_input"] == {"interruptId": interrupt.id, "approved": True}
    assert step["additional_output"]["answered_by"] == went_on.run_id
    assert alice.get(f"/api/tasks/{held.task_id}").json()["status"] == "running"
    assert Run.objects.count() == 2


def test_an_answer_here_and_one_through_the_core_at_once_exactly_one_wins(alice, held):
    (interrupt,) = held.interrupts
    owner = get_user_model().objects.get(username="alice")
    calls = [
        partial(held.answer, alice, interrupt.id, True),
        partial(
            interrupt_answer, user=owner, interrupt_id=interrupt.id, payload={"approved": False}
        ),
    ]

    here, by_core = at_once_behind_lock(held.run.thread_id, calls)

    went_on = Run.objects.exclude(pk=held.run.pk).get()
    interrupt.refresh_from_db()
    assert interrupt.status == "resolved" and interrupt.answered_by_id == went_on.pk
    if isinstance(by_core, InterruptClosed):  # the answer here won
        assert here.status_code == 200 and interrupt.answer == {"payload": {"approved": True}}
    else:
        assert isinstance(by_core, tuple) and by_core[1] == went_on
        refused = error(here, 409)
        assert refused["message"] == f'interrupt "{interrupt.id}" is not open: it is resolved'


def test_an_expired_approval_is_a_410_then_a_failed_step_and_task(alice, held):
    (interrupt,) = held.interrupts
    Interrupt.objects.filter(pk=interrupt.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    late = error(held.answer(alice, interrupt.id), 410)
    assert late["message"] == f'interrupt "{interrupt.id}" has expired'
    nothing_written(held)
    assert interrupts_expire() == 1

    step = alice.get(f"/api/tasks/{held.task_id}/steps/{held.step_id(interrupt)}").json()
    assert step["status"] == "failed" and step["is_last"] is True
    assert step["additional_output"]["interrupt_status"] == "expired"
    task = alice.get(f"/api/tasks/{held.task_id}").json()
    assert task["status"] == "failed"
    assert [cycle["status"] for cycle in task["cycles"]] == ["failed"]
    assert error(held.answer(alice, interrupt.id), 410)["message"] == late["message"]


def test_the_official_set_reads_and_answers_the_approval_step_too(alice, bob, held):
    (interrupt,) = held.interrupts
    base = f"/ap/v1/agent/tasks/{held.task_id}"

    def step(client: Any, body: Any = None) -> Any:
        return send(lambda: client.post(f"{base}/steps", body, format="json"))

    listed = alice.get(f"{base}/steps").json()["steps"]
    waiting = step(alice)  # no answer: the approval step as it stands, at once
    new_input = error(step(alice, {"input": "Something else"}), 409)
    not_bool = error(step(alice, {"additional_input": {"interruptId": interrupt.id}}), 422)
    stranger = error(
        step(bob, {"additional_input": {"interruptId": interrupt.id, "approved": True}}), 404
    )
    task = alice.get(base).json()

    assert [s["name"] for s in listed] == ["router", "worker", "approval"]
    approval = listed[-1]
    assert approval["status"] == "created" and isinstance(approval["output"], str)
    assert approval["input"] is None and approval["is_last"] is False
    assert waiting.status_code == 200 and waiting.json() == approval
    assert new_input["message"] == f"thread has an open interrupt: {interrupt.id}"
    assert not_bool["details"] == [
        {"field": "additional_input.approved", "problem": "Field required"}
    ]
    assert stranger["message"] == "task not found"
    assert task["status"] == "paused"
    nothing_written(held)

    answered = step(alice, {"additional_input": {"interruptId": interrupt.id, "approved": True}})

    assert answered.status_code == 200, answered.content
    assert answered.json()["status"] == "completed"
    # The held run ran straight through (a spec-set task): so does the run that goes on.
    assert run_step_budget(Run.objects.exclude(pk=held.run.pk).get()) is None
    work_burst(held.queue)
    assert alice.get(base).json()["status"] == "completed"
    assert [s["name"] for s in alice.get(f"{base}/steps").json()["steps"]] == [
        "router",
        "worker",
        "approval",
        "worker",
        "memory",
    ]
