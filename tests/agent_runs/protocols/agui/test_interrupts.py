"""AG-UI 1.0's frontend tools and interrupts through the official client's ``HttpAgent``
(tests/clients/agui/run_agent.mjs), unmodified, against daphne and a real worker process
whose models are a loopback OpenAI-compatible server: a client tool's call left to the
client and its result answered on the next turn; a backend tool that requires approval,
approved, rejected, or approved with edited arguments. Every stream passes the client's own
``verifyEvents`` and schemas with no warning (``converse``)."""

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from agent_runs.models import CalendarEvent, Interrupt, Message, Run, RunEvent
from tests.agent_runs.protocols.agui.test_agui_client import NODE
from tests.agent_runs.protocols.agui.test_http_agent import converse, turn
from tests.conftest import start_worker, stop_process
from tests.fake_llm import FakeOpenAI

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.integration,
    pytest.mark.skipif(NODE is None, reason="Node.js is not installed: no AG-UI client to run"),
]

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city, as the user's device sees it.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}


@pytest.fixture
def model(redis_queue: Any) -> Iterator[FakeOpenAI]:
    """A worker process whose every stage calls the loopback model."""
    with FakeOpenAI() as fake:
        process = start_worker(
            AGENT_WORKER_MODEL="openai/gpt-test",
            OPENAI_BASE_URL=fake.base_url,
            OPENAI_API_KEY="sk-test",
        )
        try:
            yield fake
        finally:
            stop_process(process)


def stored_types(run_id: str) -> list[str]:
    return list(
        RunEvent.objects.filter(run__run_id=run_id).order_by("pk").values_list("type", flat=True)
    )


def tool_results_sent(fake: FakeOpenAI) -> list[str]:
    """The tool results the model was given, in the order of its requests."""
    return [
        str(message.get("content"))
        for request in fake.requests
        for message in request["body"].get("messages", [])
        if message.get("role") == "tool"
    ]


def test_a_client_tool_is_left_to_the_client_and_its_result_answered_next_turn(
    alice_token, daphne_port, model
):
    thread_id = str(uuid.uuid4())
    model.tool_call_turns = [[("call_w1", "get_weather", json.dumps({"city": "Paris"}))]]
    model.answer = ["It is sunny in Paris."]
    asked = turn("What is the weather in Paris?", tools=[WEATHER])
    answered = {"runId": f"r-{uuid.uuid4()}", "toolResults": {"get_weather": "Sunny, 21 C"}}

    first, second = converse(daphne_port, alice_token, thread_id, [asked, answered])[0]

    assert first["ok"] and second["ok"], (first, second)
    # The model was offered the client's tool beside the backend ones; it called it, and the
    # run ended a success naming the call it left to the client, with no memory stage.
    offered = {tool["function"]["name"] for tool in model.requests[1]["body"]["tools"]}
    assert {"get_weather", "calendar_list"} <= offered
    starts = [e for e in first["events"] if e["type"] == "TOOL_CALL_START"]
    assert [(e["toolCallId"], e["toolCallName"]) for e in starts] == [("call_w1", "get_weather")]
    assert first["events"][-1]["outcome"] == {
        "type": "success",
        "pendingToolCallIds": ["call_w1"],
    }
    assert "TOOL_CALL_RESULT" not in [e["type"] for e in first["events"]]
    assert "memory" not in json.dumps([e for e in first["events"] if e["type"] == "STEP_STARTED"])
    # The journal holds what was sent (its CUSTOM run_interrupted became the outcome).
    kept = [e["type"] for e in first["events"]]
    assert stored_types(asked["runId"]) == [*kept[:-1], "CUSTOM", "RUN_FINISHED"]
    interrupt = Interrupt.objects.get(tool_call_id="call_w1")
    assert interrupt.kind == Interrupt.Kind.CLIENT_TOOL
    # The next turn carried the client's tool message: the run went on from the held reply
    # with that result, answered, and its memory stage ran.
    assert tool_results_sent(model) == ["Sunny, 21 C"]
    assert second["events"][-1]["outcome"] == {"type": "success"}
    ends = [e["metadata"] for e in second["events"] if e["type"] == "TEXT_MESSAGE_END"]
    assert ends[-1]["answer"] == "It is sunny in Paris."
    interrupt.refresh_from_db()
    assert interrupt.status == Interrupt.Status.RESOLVED
    assert interrupt.answer == {"result": "Sunny, 21 C", "error": None}
    run = Run.objects.select_related("continues").get(run_id=answered["runId"])
    assert run.continues is not None and run.continues.run_id == asked["runId"]
    assert run.status == Run.Status.COMPLETED
    # The answering run stored no user message of its own.
    users = Message.objects.filter(thread_id=thread_id, role="user")
    assert list(users.values_list("message_id", flat=True)) == [asked["id"]]


@pytest.mark.parametrize(
    ("answer", "created", "result_says"),
    [
        ({"approved": True}, "Standup", "created"),
        ({"approved": False, "reason": "not now"}, None, "denied"),
        ({"approved": True, "arguments": {**STANDUP, "title": "Retro"}}, "Retro", "created"),
    ],
    ids=["approved", "rejected", "edited"],
)
def test_a_tool_that_requires_approval_interrupts_the_run_until_answered(
    alice_token, daphne_port, model, answer, created, result_says
):
    thread_id = str(uuid.uuid4())
    model.tool_call_turns = [[("call_c1", "calendar_create", json.dumps(STANDUP))]]
    model.answer = ["Done."]
    asked = turn("Put a standup in my calendar tomorrow at nine")
    resumed = {"runId": f"r-{uuid.uuid4()}", "resume": [answer]}

    (first, second), messages = converse(daphne_port, alice_token, thread_id, [asked, resumed])

    assert first["ok"] and second["ok"], (first, second)
    # Nothing ran before the answer; the run ended on an interrupt naming the call.
    outcome = first["events"][-1]["outcome"]
    assert outcome["type"] == "interrupt"
    (interrupt,) = outcome["interrupts"]
    stored = Interrupt.objects.get(pk=interrupt["id"])
    assert interrupt["toolCallId"] == "call_c1" and interrupt["reason"] == "tool_approval"
    assert interrupt["metadata"] == {"toolName": "calendar_create", "arguments": STANDUP}
    assert interrupt["responseSchema"]["required"] == ["approved"]
    assert "title" in interrupt["responseSchema"]["properties"]["arguments"]["properties"]
    assert interrupt["expiresAt"].startswith(stored.expires_at.date().isoformat())
    types = [e["type"] for e in first["events"]]
    assert types[-3:] == ["MESSAGES_SNAPSHOT", "STEP_FINISHED", "RUN_FINISHED"]
    assert "memory" not in json.dumps([e for e in first["events"] if e["type"] == "STEP_STARTED"])
    snapshot = next(e for e in first["events"] if e["type"] == "MESSAGES_SNAPSHOT")
    calls = [call for m in snapshot["messages"] for call in m.get("toolCalls", [])]
    assert [call["id"] for call in calls] == ["call_c1"]
    assert first["pendingInterrupts"][0]["id"] == interrupt["id"]
    # The answer: the run went on from the tool call, as answered.
    stored.refresh_from_db()
    assert stored.status == Interrupt.Status.RESOLVED and stored.answer == {"payload": answer}
    titles = list(CalendarEvent.objects.values_list("title", flat=True))
    assert titles == ([created] if created else [])
    results = [e for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert [r["toolCallId"] for r in results] == ["call_c1"]
    if created is None:  # the client reads that the person declined, with their reason
        assert results[0]["metadata"]["status"] == "failure"
    assert ("The user declined this call: not now" in json.dumps(results)) == (created is None)
    (result,) = tool_results_sent(model)
    assert result_says in result.lower()
    assert second["events"][-1]["outcome"] == {"type": "success"}
    assert second["pendingInterrupts"] == []
    assert [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")][
        -1
    ] == "Done."
