"""Approvals over the Agent API (docs/protocols/agent-api.md, "Approvals"): a run that stops
on a tool call waiting for approval streams an ``mcp_approval_request`` message and ends
``incomplete``; the session's next request, an ``mcp_approval_response``, goes on from the
tool call. Over real HTTP against daphne, a real worker whose model is a loopback server."""

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agent_runs.models import CalendarEvent, Interrupt, Run
from agent_runs.services.interrupts import interrupt_answer
from tests.agent_runs.protocols.agent_api.test_process import (
    PROCESS,
    agent_request,
    assert_numbered,
    brief,
    call,
    collapse,
    model_worker,
)
from tests.conftest import stop_process
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}


@pytest.fixture
def model(redis_queue: Any) -> Iterator[FakeOpenAI]:
    """A real worker whose model is a loopback OpenAI-compatible server."""
    with FakeOpenAI() as fake:
        process = model_worker(fake)
        try:
            yield fake
        finally:
            stop_process(process)


def approval_response(*answers: dict[str, Any], session_id: str) -> dict[str, Any]:
    message = {
        "role": "user",
        "type": "mcp_approval_response",
        "content": [{"type": "data", "data": answer} for answer in answers],
    }
    return {"input": [message], "session_id": session_id}


def ask(port: int, token: str, model: Any, session_id: str) -> dict[str, Any]:
    """A request whose run stops on the calendar's write; its approval request."""
    model.tool_call_turns = [[("call_c1", "calendar_create", json.dumps(STANDUP))]]
    model.answer = ["Done."]
    answer = call(
        port, "POST", PROCESS, agent_request("standup?", session_id=session_id), token=token
    )
    assert answer.status == 200, answer.body
    assert_numbered(answer)
    objects = answer.objects
    assert collapse([brief(obj) for obj in objects]) == [
        "response:created",
        "response:in_progress",
        "function_call:in_progress",
        "content:completed",
        "function_call:completed",
        "mcp_approval_request:in_progress",
        "content:completed",
        "mcp_approval_request:completed",
        "response:incomplete",
    ]
    final = objects[-1]
    assert final["output"][-1]["type"] == "mcp_approval_request"
    assert final["completed_at"] is not None
    request = final["output"][-1]["content"][0]["data"]
    return request


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "rejected"])
def test_an_approval_request_is_answered_by_the_sessions_next_request(
    alice_token, daphne_port, model, approve
):
    request = ask(daphne_port, alice_token, model, "s-approve")
    interrupt = Interrupt.objects.get()
    assert request["id"] == interrupt.id and request["server_label"] == "agent"
    assert request["name"] == "calendar_create" and json.loads(request["arguments"]) == STANDUP
    assert request["interrupt"]["responseSchema"]["required"] == ["approved"]
    answer = {"approval_request_id": interrupt.id, "approve": approve, "reason": "ok"}

    resumed = call(
        daphne_port,
        "POST",
        PROCESS,
        approval_response(answer, session_id="s-approve"),
        token=alice_token,
    )

    assert resumed.status == 200, resumed.body
    assert_numbered(resumed)
    final = resumed.objects[-1]
    assert final["status"] == "completed" and final["session_id"] == "s-approve"
    outputs = [m for m in final["output"] if m["type"] == "function_call_output"]
    assert [m["content"][0]["data"]["call_id"] for m in outputs] == ["call_c1"]
    assert final["output"][-1]["content"][0]["text"] == "Done."
    assert CalendarEvent.objects.exists() == approve
    interrupt.refresh_from_db()
    assert interrupt.status == "resolved"
    assert interrupt.answer == {"payload": {"approved": approve, "reason": "ok"}}
    assert Run.objects.get(run_id=final["id"]).continues_id == interrupt.run_id


def test_a_wrong_answer_is_refused_in_the_protocols_shape(
    alice, alice_token, bob_token, daphne_port, model
):
    ask(daphne_port, alice_token, model, "s-wrong")
    interrupt = Interrupt.objects.get()

    def answer(body: dict[str, Any], token: str = alice_token) -> Any:
        return call(daphne_port, "POST", PROCESS, body, token=token)

    unknown = answer(
        approval_response({"approval_request_id": "int-x", "approve": True}, session_id="s-wrong")
    )
    stranger = answer(
        approval_response(
            {"approval_request_id": interrupt.id, "approve": True}, session_id="s-wrong"
        ),
        token=bob_token,
    )
    bad_arguments = answer(
        approval_response(
            {
                "approval_request_id": interrupt.id,
                "approve": True,
                "arguments": {"title": 3, "start": "09:00"},
            },
            session_id="s-wrong",
        )
    )
    new_message = answer(agent_request("something else", session_id="s-wrong"))
    malformed = answer(
        approval_response({"approval_request_id": interrupt.id}, session_id="s-wrong")
    )

    assert unknown.status == 404
    assert unknown.json()["error"]["message"] == 'interrupt "int-x" not found'
    assert stranger.status == 404  # bob's session of that name is his own: nothing to answer
    assert bad_arguments.status == 422
    assert "payload.arguments.title" in bad_arguments.json()["error"]["message"]
    assert new_message.status == 409
    assert new_message.json()["error"]["message"] == f"thread has an open interrupt: {interrupt.id}"
    assert malformed.status == 400
    assert Run.objects.count() == 1 and Interrupt.objects.get().status == "pending"
    # Answered elsewhere (a person, another protocol): closed for this one too.
    interrupt_answer(
        user=interrupt.thread.owner, interrupt_id=interrupt.id, payload={"approved": False}
    )
    late = answer(
        approval_response(
            {"approval_request_id": interrupt.id, "approve": True}, session_id="s-wrong"
        )
    )
    assert late.status == 409
    assert late.json()["error"]["message"] == (
        f'interrupt "{interrupt.id}" is not open: it is resolved'
    )
