"""Approvals over A2A, with the unmodified clients over real HTTP against daphne and a real
worker whose models are a loopback OpenAI-compatible server: a tool that requires approval
makes the task ``TASK_STATE_INPUT_REQUIRED`` with the interrupt in a data part; a follow-up
on the same task approves or rejects it (a data part, or the text a person types) and the
task goes on to its end; an answer given elsewhere (``POST /api/v1/agent/interrupts/{id}``,
the REST endpoint) resumes a subscriber's stream; of two answers at once through A2A and the
REST endpoint exactly one wins; wrong, late and strangers' answers are the protocol's errors
and write nothing. docs/protocols/a2a.md, Approvals."""

import asyncio
import json
import os
import shutil
import subprocess
import threading
import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
)
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError
from django.utils import timezone
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

from agent_runs.models import CalendarEvent, Interrupt, Run
from agent_runs.services.interrupts import interrupts_expire
from tests.agent_runs.protocols.a2a.test_a2a_js import CLIENT_DIR
from tests.agent_runs.protocols.a2a.test_a2a_sdk import (
    answer_text,
    client_for,
    collect,
    message,
    raw,
    states,
)
from tests.conftest import fake_model_env, serving, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}
V1 = {"A2A-Version": "1.0"}


def ask_approval(model: Any) -> None:
    """The worker's model calls calendar_create (which needs approval in chat mode), then,
    once the run goes on, answers "Done."."""
    model.worker_turns = 0
    model.tool_call_turns = [[("call_c1", "calendar_create", json.dumps(STANDUP))]]
    model.answer = ["Done."]


def data_message(task: dict[str, Any], *answers: dict[str, Any]) -> SendMessageRequest:
    parts = [Part(data=ParseDict(answer, Value())) for answer in answers]
    return SendMessageRequest(
        message=Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=parts,
            task_id=task["id"],
            context_id=task["contextId"],
        )
    )


def request_of(task_or_update: dict[str, Any]) -> dict[str, Any]:
    """The approval request: the status message of a task (or status update)."""
    message: dict[str, Any] = task_or_update["status"]["message"]
    return message


def interrupts_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [part["data"]["interrupt"] for part in message["parts"] if "data" in part]


async def until_input_required(client: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A new task asking for the calendar event: its stream, to the approval request."""
    asked = await collect(client.send_message(message("Put a standup in my calendar")))
    return asked, asked[0]["task"]


@pytest.mark.parametrize("legacy", [False, True], ids=["1.0", "0.3"])
@pytest.mark.parametrize(
    ("answer", "created", "payload"),
    [
        ({"approved": True}, "Standup", {"approved": True}),
        ("Reject: not now", None, {"approved": False, "reason": "not now"}),
        (
            {"approved": True, "arguments": {**STANDUP, "title": "Retro"}},
            "Retro",
            {"approved": True, "arguments": {**STANDUP, "title": "Retro"}},
        ),
    ],
    ids=["approved", "rejected-by-text", "edited"],
)
def test_an_approval_asks_for_input_and_a_follow_up_answers_it(
    model, alice_token, legacy, answer, created, payload
):
    ask_approval(model)

    async def scenario() -> tuple[Any, ...]:
        client = await client_for(model.port, alice_token, legacy=legacy)
        asked, task = await until_input_required(client)
        waiting = MessageToDict(await client.get_task(GetTaskRequest(id=task["id"])))
        if isinstance(answer, str):
            follow = message(answer, task_id=task["id"], context_id=task["contextId"])
        else:
            interrupt_id = interrupts_of(waiting["status"]["message"])[0]["id"]
            follow = data_message(task, {"interruptId": interrupt_id, **answer})
        answered = await collect(client.send_message(follow))
        whole = MessageToDict(await client.get_task(GetTaskRequest(id=task["id"])))
        await client.close()
        return asked, waiting, answered, whole

    asked, waiting, answered, whole = asyncio.run(scenario())

    # The stream ends on input-required; its message is the approval request.
    assert states(asked)[-1] == "TASK_STATE_INPUT_REQUIRED"
    request = request_of(asked[-1]["statusUpdate"])
    assert request["role"] == "ROLE_AGENT"
    assert request["parts"][0]["text"].startswith("Allow calendar_create to run")
    (interrupt,) = interrupts_of(request)
    stored = Interrupt.objects.get(pk=interrupt["id"])
    assert interrupt["tool"] == "calendar_create" and interrupt["toolCallId"] == "call_c1"
    assert interrupt["arguments"] == STANDUP and interrupt["reason"] == "tool_approval"
    assert interrupt["responseSchema"]["required"] == ["approved"]
    assert interrupt["expiresAt"].startswith(stored.expires_at.date().isoformat())
    # GetTask says the same, the request last in its history.
    assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert waiting["status"]["message"] == request == waiting["history"][-1]
    # The answer went on with the same task to its end.
    assert answered[0]["task"]["id"] == asked[0]["task"]["id"]
    assert states(answered)[0] == "TASK_STATE_SUBMITTED"
    assert states(answered)[-1] == "TASK_STATE_COMPLETED"
    assert answer_text(answered) == "Done."
    stored.refresh_from_db()
    assert stored.status == Interrupt.Status.RESOLVED and stored.answer == {"payload": payload}
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == (
        [created] if created else []
    )
    results = [
        part["data"]["toolResult"]
        for event in answered
        if "statusUpdate" in event and "message" in event["statusUpdate"]["status"]
        for part in event["statusUpdate"]["status"]["message"]["parts"]
        if "data" in part
    ]
    assert [result["id"] for result in results] == ["call_c1"]
    assert whole["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [m["role"] for m in whole["history"]] == [
        "ROLE_USER",
        "ROLE_AGENT",
        "ROLE_USER",
        "ROLE_AGENT",
    ]
    assert whole["history"][1] == request
    runs = Run.objects.filter(thread_id=task_of(asked)["contextId"]).order_by("pk")
    assert [r.parent_run_id for r in runs] == ["", task_of(asked)["id"]]
    assert runs[1].continues_id == runs[0].pk


def task_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    task: dict[str, Any] = events[0]["task"]
    return task


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
@pytest.mark.parametrize(
    ("answer", "created"),
    [("approve-data", ["Standup"]), ("reject", [])],
    ids=["approve", "reject"],
)
def test_the_js_client_sees_and_answers_an_approval(model, alice_token, answer, created):
    ask_approval(model)
    node = shutil.which("node")
    assert node is not None
    command = [node, "approve_task.mjs", f"http://127.0.0.1:{model.port}", alice_token]
    done = subprocess.run(
        [*command, "Put a standup in my calendar", answer],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )

    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    split = lines.index({"answered": True})
    asked, answered, final = lines[:split], lines[split + 1 : -1], lines[-1]["task"]
    assert states(asked)[-1] == "TASK_STATE_INPUT_REQUIRED"
    (interrupt,) = interrupts_of(request_of(asked[-1]["statusUpdate"]))
    assert interrupt["tool"] == "calendar_create" and interrupt["arguments"] == STANDUP
    assert states(answered)[-1] == "TASK_STATE_COMPLETED"
    assert final["status"]["state"] == "TASK_STATE_COMPLETED"
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == created
    stored = Interrupt.objects.get(pk=interrupt["id"])
    assert stored.answer == {"payload": {"approved": answer == "approve-data"}}


@pytest.mark.parametrize("legacy", [False, True], ids=["1.0", "0.3"])
def test_an_answer_given_elsewhere_resumes_a_subscriber_to_completion(
    model, alice_token, bob_token, legacy
):
    """The cross-protocol case: the task began over A2A, a person approves it with the REST
    endpoint, and the A2A subscriber that was waiting on the approval streams the rest of
    the task to its end."""
    ask_approval(model)

    async def scenario() -> tuple[Any, ...]:
        client = await client_for(model.port, alice_token, legacy=legacy)
        _asked, task = await until_input_required(client)
        subscription = client.subscribe(SubscribeToTaskRequest(id=task["id"]))
        first = MessageToDict(await anext(subscription))
        (interrupt,) = interrupts_of(first["task"]["status"]["message"])
        resumed = await asyncio.to_thread(
            answer_over_rest, model.port, alice_token, interrupt["id"], {"approved": True}
        )
        rest = await collect(subscription)
        whole = MessageToDict(await client.get_task(GetTaskRequest(id=task["id"])))
        errors: dict[str, Exception] = {}
        bob = await client_for(model.port, bob_token, streaming=False)
        for name, call in {
            # Too late: the task went on already.
            "late": collect(
                client.send_message(data_message(task, {"interruptId": interrupt["id"]}))
            ),
            "stranger": collect(bob.send_message(message("approve", task_id=task["id"]))),
        }.items():
            try:
                await call
            except (A2AClientError, Exception) as exc:
                errors[name] = exc
        await client.close()
        await bob.close()
        return first, interrupt, resumed, rest, whole, errors

    first, interrupt, resumed, rest, whole, errors = asyncio.run(scenario())

    assert first["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["continuedBy"].startswith("resume-")
    assert states(rest)[0] == "TASK_STATE_WORKING" and states(rest)[-1] == "TASK_STATE_COMPLETED"
    assert all(
        e.get("statusUpdate", e.get("artifactUpdate", {})).get("taskId") == first["task"]["id"]
        for e in rest
    )
    assert answer_text(rest) == "Done."
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == ["Standup"]
    # The history shows the answer given elsewhere as the user's data part.
    assert whole["status"]["state"] == "TASK_STATE_COMPLETED"
    answer = whole["history"][2]
    assert answer["role"] == "ROLE_USER"
    data = {"interruptId": interrupt["id"], "approved": True}
    assert [part["data"] for part in answer["parts"]] == [data]
    assert whole["history"][3]["parts"][0]["text"] == "Done."
    assert isinstance(errors["late"], UnsupportedOperationError)
    assert isinstance(errors["stranger"], TaskNotFoundError)
    assert Run.objects.filter(thread_id=first["task"]["contextId"]).count() == 2


def answer_over_rest(
    port: int, token: str, interrupt_id: str, payload: dict[str, Any]
) -> httpx.Response:
    """The answer a person gives in a web app: ``POST /api/v1/agent/interrupts/{id}``."""
    return httpx.post(
        f"http://127.0.0.1:{port}/api/v1/agent/interrupts/{interrupt_id}",
        json=payload,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def rpc(port: int, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer: dict[str, Any] = raw(port, token, body, **V1).json()
    return answer


def waiting_task(model: Any, token: str) -> tuple[dict[str, Any], str]:
    """A task waiting on its approval (asked without a stream): it and its interrupt's id."""
    ask_approval(model)
    hello = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "Add it"}]}
    task = rpc(model.port, token, "SendMessage", {"message": hello})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    return task, interrupts_of(task["status"]["message"])[0]["id"]


def answer_params(task: dict[str, Any], *parts: dict[str, Any]) -> dict[str, Any]:
    return {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "taskId": task["id"],
            "contextId": task["contextId"],
            "parts": list(parts),
        },
        "configuration": {"returnImmediately": True},
    }


def race(port: int, token: str, task: dict[str, Any], interrupt_id: str) -> dict[str, Any]:
    """An approval over A2A and a rejection with the REST endpoint, sent at once."""
    outcomes: dict[str, Any] = {}
    ready = threading.Barrier(2)

    def over_a2a() -> None:
        ready.wait()
        data = {"data": {"interruptId": interrupt_id, "approved": True}}
        outcomes["a2a"] = rpc(port, token, "SendMessage", answer_params(task, data))

    def elsewhere() -> None:
        ready.wait()
        outcomes["rest"] = answer_over_rest(port, token, interrupt_id, {"approved": False})

    threads = [threading.Thread(target=over_a2a), threading.Thread(target=elsewhere)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def test_an_a2a_answer_and_a_rest_answer_at_once_one_wins(model, alice_token):
    for _round in range(4):
        task, interrupt_id = waiting_task(model, alice_token)

        outcomes = race(model.port, alice_token, task, interrupt_id)

        a2a_won = "result" in outcomes["a2a"]
        rest_won = outcomes["rest"].status_code == 200
        assert a2a_won != rest_won, (outcomes["a2a"], outcomes["rest"].text)
        if a2a_won:  # each loser gets its protocol's conflict
            assert outcomes["rest"].status_code == 409
            assert "is not open: it is resolved" in outcomes["rest"].json()["detail"]
        else:
            assert outcomes["a2a"]["error"]["code"] == -32004
        runs = list(Run.objects.filter(thread_id=task["contextId"]).order_by("pk"))
        assert len(runs) == 2 and runs[1].continues_id == runs[0].pk
        stored = Interrupt.objects.get(pk=interrupt_id)
        assert stored.answered_by_id == runs[1].pk
        assert stored.answer == {"payload": {"approved": a2a_won}}
        wait_for(lambda: Run.objects.get(pk=runs[1].pk).status == Run.Status.COMPLETED, 60)  # noqa: B023  # called within this round


def test_wrong_answers_are_the_protocol_s_errors_and_write_nothing(model, alice_token, bob_token):
    task, interrupt_id = waiting_task(model, alice_token)
    before = Run.objects.count()
    cases: list[tuple[list[dict[str, Any]], int]] = [
        ([{"text": "maybe later"}], -32602),  # neither an answer's data part nor approve/reject
        ([{"data": {"interruptId": "int-nope", "approved": True}}], -32602),  # unknown interrupt
        ([{"data": {"interruptId": interrupt_id, "approved": "yes"}}], -32602),  # not a boolean
        ([{"data": {"interruptId": interrupt_id}}], -32602),  # no "approved"
        ([{"data": {"approved": True}}], -32602),  # no "interruptId"
        (
            [{"data": {"interruptId": interrupt_id, "approved": True, "arguments": {"x": 1}}}],
            -32602,  # arguments the tool does not take
        ),
        (
            [
                {"data": {"interruptId": interrupt_id, "approved": True}},
                {"data": {"interruptId": interrupt_id, "approved": False}},
            ],
            -32602,  # answered twice
        ),
        ([{"url": "https://example.com/a.pdf"}], -32005),
    ]
    for parts, code in cases:
        answer = rpc(model.port, alice_token, "SendMessage", answer_params(task, *parts))
        assert answer["error"]["code"] == code, (parts, answer)
    # A stranger's answer, or look, finds no task.
    data = {"data": {"interruptId": interrupt_id, "approved": True}}
    stranger = rpc(model.port, bob_token, "SendMessage", answer_params(task, data))
    assert stranger["error"]["code"] == -32001
    assert rpc(model.port, bob_token, "GetTask", {"id": task["id"]})["error"]["code"] == -32001
    # A new task on the same context while the approval is open is refused, naming it.
    hello = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "contextId": task["contextId"],
        "parts": [{"text": "Something else"}],
    }
    busy = rpc(model.port, alice_token, "SendMessage", {"message": hello})
    assert busy["error"]["code"] == -32004 and interrupt_id in busy["error"]["message"]
    # A task waiting on approval cannot be canceled (answer it instead).
    canceled = rpc(model.port, alice_token, "CancelTask", {"id": task["id"]})
    assert canceled["error"]["code"] == -32002
    assert Run.objects.count() == before
    assert Interrupt.objects.get(pk=interrupt_id).status == Interrupt.Status.PENDING
    # The answer that fits still goes through.
    answered = rpc(model.port, alice_token, "SendMessage", answer_params(task, data))
    assert answered["result"]["task"]["status"]["state"] in (
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
    )
    # And a second answer is late: the task no longer waits.
    again = rpc(model.port, alice_token, "SendMessage", answer_params(task, data))
    assert again["error"]["code"] == -32004
    assert Run.objects.count() == before + 1


def test_an_expired_approval_fails_the_task_everywhere(model, alice_token):
    task, interrupt_id = waiting_task(model, alice_token)
    Interrupt.objects.filter(pk=interrupt_id).update(expires_at=timezone.now() - timedelta(1))

    past_due = rpc(model.port, alice_token, "GetTask", {"id": task["id"]})["result"]
    answer = rpc(
        model.port,
        alice_token,
        "SendMessage",
        answer_params(task, {"data": {"interruptId": interrupt_id, "approved": True}}),
    )
    assert interrupts_expire() == 1
    expired = rpc(model.port, alice_token, "GetTask", {"id": task["id"]})["result"]
    subscribed = raw(
        model.port,
        alice_token,
        {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task["id"]}},
        **V1,
    ).json()

    for seen in (past_due, expired):
        assert seen["status"]["state"] == "TASK_STATE_FAILED"
        assert "expired" in seen["status"]["message"]["parts"][0]["text"]
    assert answer["error"]["code"] == -32004
    assert subscribed["error"]["code"] == -32004
    assert Run.objects.filter(thread_id=task["contextId"]).count() == 1
    # The thread is free again: a new task on the context runs.
    model.tool_call_turns = []
    hello = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "contextId": task["contextId"],
        "parts": [{"text": "Hello again"}],
    }
    again = rpc(model.port, alice_token, "SendMessage", {"message": hello})["result"]["task"]
    assert again["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_clarifying_question_is_still_input_required_without_an_interrupt(model, alice_token):
    model.route = {"route": "clarify", "tools": []}
    model.output = {"result_type": "clarification", "status": "success"}
    model.answer = ["Which calendar?"]

    async def scenario() -> tuple[list[dict[str, Any]], Exception]:
        client = await client_for(model.port, alice_token)
        asked = await collect(client.send_message(message("Add a meeting")))
        with pytest.raises(UnsupportedOperationError) as refused:
            await collect(client.subscribe(SubscribeToTaskRequest(id=asked[0]["task"]["id"])))
        await client.close()
        return asked, refused.value

    asked, refused = asyncio.run(scenario())

    assert states(asked)[-1] == "TASK_STATE_INPUT_REQUIRED"
    question = request_of(asked[-1]["statusUpdate"])
    assert question["parts"] == [{"text": "Which calendar?"}]  # no interrupt data part
    assert Interrupt.objects.count() == 0
    assert "INPUT_REQUIRED" in str(refused)


def test_parallel_calls_are_one_request_answered_all_at_once(model, alice_token):
    retro = {**STANDUP, "title": "Retro"}
    model.worker_turns = 0
    model.tool_call_turns = [
        [
            ("call_c1", "calendar_create", json.dumps(STANDUP)),
            ("call_c2", "calendar_create", json.dumps(retro)),
        ]
    ]
    model.answer = ["Done."]
    hello = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "Add both"}]}
    task = rpc(model.port, alice_token, "SendMessage", {"message": hello})["result"]["task"]
    interrupts = interrupts_of(task["status"]["message"])
    first = {"data": {"interruptId": interrupts[0]["id"], "approved": True}}

    partial = rpc(model.port, alice_token, "SendMessage", answer_params(task, first))
    typed = rpc(
        model.port,
        alice_token,
        "SendMessage",
        {**answer_params(task, {"text": "APPROVE"}), "configuration": {}},
    )

    assert [item["arguments"]["title"] for item in interrupts] == ["Standup", "Retro"]
    assert partial["error"]["code"] == -32602
    assert interrupts[1]["id"] in partial["error"]["message"]  # the one left out
    assert typed["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert sorted(CalendarEvent.objects.values_list("title", flat=True)) == ["Retro", "Standup"]
    answers = Interrupt.objects.filter(pk__in=[item["id"] for item in interrupts])
    assert [item.answer for item in answers] == [{"payload": {"approved": True}}] * 2


def test_a_subscriber_waiting_on_an_approval_that_expires_sees_the_task_fail(
    redis_queue, alice_token
):
    with (
        FakeOpenAI() as fake,
        serving(**fake_model_env(fake), AGENT_SSE_KEEPALIVE_SECONDS="0.2") as port,
    ):
        fake.port = port  # type: ignore[attr-defined]  # the test's handle on the server
        task, interrupt_id = waiting_task(fake, alice_token)

        async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            client = await client_for(port, alice_token)
            subscription = client.subscribe(SubscribeToTaskRequest(id=task["id"]))
            first = MessageToDict(await anext(subscription))
            past = timezone.now() - timedelta(seconds=1)
            await asyncio.to_thread(
                lambda: Interrupt.objects.filter(pk=interrupt_id).update(expires_at=past)
            )
            rest = await collect(subscription)
            await client.close()
            return first, rest

        first, rest = asyncio.run(scenario())

    assert first["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert states(rest) == ["TASK_STATE_FAILED"]
    assert "expired" in rest[0]["statusUpdate"]["status"]["message"]["parts"][0]["text"]
