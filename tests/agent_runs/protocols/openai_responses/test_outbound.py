"""A run's journal as Responses stream events and the Response object (outbound.py): golden
events, checked by the SDK's own event union, no database."""

import json
from typing import Any

from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from agent_runs.protocols.openai_responses.outbound import (
    ResponseProjection,
    is_terminal,
    response_of_journal,
    usage_object,
)

RUN = "resp_0123"
IDS = {"threadId": "6f1c2a52-8a0e-4c59-9d1b-0c0f4f3e9a11", "runId": RUN}
HEAD = {
    "id": RUN,
    "created_at": 1_763_900_000,
    "model": "gpt-test",
    "instructions": None,
    "metadata": {},
    "background": False,
    "previous_response_id": None,
    "conversation": None,
    "tools": [],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
}
USAGE = usage_object(input_tokens=11, output_tokens=5, cached_tokens=3, reasoning_tokens=2)
EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def text_journal(answer: tuple[str, ...] = ("Hello", " there.")) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", **IDS},
        {"type": "STEP_STARTED", "stepName": "router", **IDS},
        {"type": "STEP_FINISHED", "stepName": "router", **IDS},
        {"type": "STEP_STARTED", "stepName": "worker", **IDS},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant", **IDS},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": d, **IDS} for d in answer),
        {"type": "TEXT_MESSAGE_END", "messageId": "m1", "answer": "".join(answer), **IDS},
        {"type": "STEP_FINISHED", "stepName": "worker", **IDS},
        {"type": "RUN_FINISHED", **IDS},
    ]


def tool_journal(status: str = "success") -> list[dict[str, Any]]:
    tool = {"toolCallId": "call_1", "toolCallName": "calendar_list", "stage": "worker", **IDS}
    return [
        {"type": "RUN_STARTED", **IDS},
        {"type": "TOOL_CALL_START", "parentMessageId": "m1", "messageId": "m1", **tool},
        {"type": "TOOL_CALL_ARGS", "delta": '{"day": "today"}', **tool},
        {"type": "TOOL_CALL_END", **tool},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "tool-call_1",
            "toolCallId": "call_1",
            "content": '{"events": []}' if status == "success" else "calendar down",
            "role": "tool",
            "status": status,
            "error": None if status == "success" else "calendar down",
            **IDS,
        },
        {"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant", **IDS},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m2", "delta": "Nothing today.", **IDS},
        {"type": "TEXT_MESSAGE_END", "messageId": "m2", **IDS},
        {"type": "RUN_FINISHED", **IDS},
    ]


def project(payloads: list[dict[str, Any]], head: dict[str, Any] = HEAD) -> list[dict[str, Any]]:
    projection = ResponseProjection(head)
    events: list[dict[str, Any]] = []
    for payload in payloads:
        events += projection.translate(payload, usage=USAGE if is_terminal(payload) else None)
    for event in events:
        EVENTS.validate_python(event)  # each one the SDK's own type
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    return events


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def test_a_text_run_gives_the_sdk_s_event_sequence():
    events = project(text_journal())

    assert types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert events[0]["response"]["id"] == RUN and events[0]["response"]["status"] == "in_progress"
    assert events[0]["response"]["output"] == []
    assert events[2]["item"] == {
        "id": "msg_m1",
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    assert events[4] == {
        "type": "response.output_text.delta",
        "item_id": "msg_m1",
        "output_index": 0,
        "content_index": 0,
        "delta": "Hello",
        "logprobs": [],
        "sequence_number": 4,
    }
    assert events[6]["text"] == "Hello there."
    completed = events[-1]["response"]
    assert completed["status"] == "completed"
    assert completed["usage"] == {
        "input_tokens": 11,
        "input_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 2},
        "total_tokens": 16,
    }
    assert completed["output"] == [
        {
            "id": "msg_m1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hello there.", "annotations": []}],
        }
    ]
    assert completed["model"] == "gpt-test" and completed["object"] == "response"


def test_a_replay_sends_the_same_bytes_as_the_live_stream():
    journal = tool_journal()
    live = json.dumps(project(journal))
    replayed = json.dumps(project([dict(payload) for payload in journal]))
    assert live == replayed


def test_a_background_response_is_created_queued():
    events = project(text_journal(), head={**HEAD, "background": True})
    assert events[0]["response"]["status"] == "queued"
    assert events[1]["response"]["status"] == "in_progress"


def test_the_agent_s_tools_are_mcp_calls_not_function_calls():
    events = project(tool_journal())

    assert types(events)[:7] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
    ]
    assert events[2]["item"]["type"] == "mcp_call"
    assert events[2]["item"]["server_label"] == "agent"
    assert events[5]["arguments"] == '{"day": "today"}'
    done = events[7]
    assert done["type"] == "response.output_item.done"
    assert done["item"] == {
        "id": "mcp_call_1",
        "type": "mcp_call",
        "name": "calendar_list",
        "server_label": "agent",
        "arguments": '{"day": "today"}',
        "output": '{"events": []}',
        "error": None,
        "status": "completed",
    }
    output = events[-1]["response"]["output"]
    assert [item["type"] for item in output] == ["mcp_call", "message"]
    assert events[8]["output_index"] == 1  # the message after the tool call


def test_a_failed_tool_is_a_failed_mcp_call():
    events = project(tool_journal(status="error"))
    assert "response.mcp_call.failed" in types(events)
    item = events[-1]["response"]["output"][0]
    assert item["status"] == "failed"
    assert item["error"] == {"type": "mcp_tool_execution_error", "content": "calendar down"}


def test_a_failed_run_is_response_failed_with_its_message():
    failure = {"type": "RUN_ERROR", "code": "model_error", "message": "the model failed"}
    journal = [*text_journal()[:5], {**failure, **IDS}]
    events = project(journal)

    assert types(events)[-1] == "response.failed"
    response = events[-1]["response"]
    assert response["status"] == "failed"
    assert response["error"] == {"code": "server_error", "message": "the model failed"}
    assert response["output"][0]["status"] == "incomplete"
    assert "error" not in events[-1]  # a top-level error key would make the SDK raise


def test_a_cancelled_run_ends_incomplete_with_the_status_cancelled():
    cancel = {"type": "RUN_ERROR", "code": "cancelled", "message": "the run was cancelled"}
    journal = [*text_journal()[:6], {**cancel, **IDS}]
    events = project(journal)

    assert types(events)[-1] == "response.incomplete"
    response = events[-1]["response"]
    assert response["status"] == "cancelled" and response["error"] is None
    assert response["output"][0]["content"][0]["text"] == "Hello"  # what it had said


def test_nothing_is_sent_after_the_terminal_event():
    projection = ResponseProjection(HEAD)
    for payload in text_journal():
        projection.translate(payload, usage=USAGE if is_terminal(payload) else None)
    assert projection.translate({"type": "RUN_STARTED", **IDS}) == []


def test_the_response_object_of_a_journal_is_the_completed_event_s():
    journal = text_journal()
    final = project(journal)[-1]["response"]
    rebuilt = response_of_journal(head=HEAD, payloads=journal, status="completed", usage=USAGE)
    assert rebuilt == final


def test_a_queued_response_has_no_output_yet():
    response = response_of_journal(head=HEAD, payloads=[], status="queued", usage=None)
    assert response["status"] == "queued" and response["output"] == []
    assert response["usage"] is None


STANDUP = {"title": "Standup", "start": "2026-03-17T09:00"}
INTERRUPT = "int-5f0c"


def held_journal() -> list[dict[str, Any]]:
    """A run that stops on an approval of calendar_create, beside a calendar_list that ran
    (the journal as the worker writes it: the calls, the snapshot, ``run_interrupted``)."""
    create = {"toolCallId": "call_c1", "toolCallName": "calendar_create", "stage": "worker"}
    listing = {"toolCallId": "call_l", "toolCallName": "calendar_list", "stage": "worker"}
    interrupt = {
        "id": INTERRUPT,
        "reason": "tool_approval",
        "message": "Allow calendar_create to run with these arguments?",
        "toolCallId": "call_c1",
        "responseSchema": {"type": "object"},
        "expiresAt": "2026-11-28T09:12:00.000000Z",
        "metadata": {"toolName": "calendar_create", "arguments": STANDUP},
    }
    return [
        {"type": "RUN_STARTED", **IDS},
        {"type": "TOOL_CALL_START", "parentMessageId": "w", **create, **IDS},
        {"type": "TOOL_CALL_START", "parentMessageId": "w", **listing, **IDS},
        {"type": "TOOL_CALL_ARGS", "delta": json.dumps(STANDUP), **create, **IDS},
        {"type": "TOOL_CALL_END", **create, **IDS},
        {"type": "TOOL_CALL_ARGS", "delta": "{}", **listing, **IDS},
        {"type": "TOOL_CALL_END", **listing, **IDS},
        {
            "type": "TOOL_CALL_RESULT",
            "toolCallId": "call_l",
            "content": "[]",
            "status": "success",
            **IDS,
        },
        {"type": "MESSAGES_SNAPSHOT", "messages": [], **IDS},
        {"type": "STEP_FINISHED", "stepName": "worker", **IDS},
        {
            "type": "CUSTOM",
            "name": "run_interrupted",
            "value": {"interrupts": [interrupt], "pendingToolCallIds": []},
            **IDS,
        },
        {"type": "RUN_FINISHED", **IDS},
    ]


def continued_journal(status: str = "success") -> list[dict[str, Any]]:
    """The run that goes on with the held reply: the held call's result comes first, with
    no TOOL_CALL_START of its own (the call was made in the run held)."""
    declined = "The user declined this call: not now"
    return [
        {"type": "RUN_STARTED", **IDS},
        {"type": "STEP_STARTED", "stepName": "worker", **IDS},
        {
            "type": "TOOL_CALL_RESULT",
            "toolCallId": "call_c1",
            "tool_call_id": "call_c1",
            "content": '{"id": 1}' if status == "success" else declined,
            "status": status,
            "error": None if status == "success" else declined,
            "tool_name": "calendar_create",
            "tool_call_args": STANDUP,
            **IDS,
        },
        *text_journal(("Done.",))[4:7],
        {"type": "RUN_FINISHED", **IDS},
    ]


def test_a_run_held_on_an_approval_ends_incomplete_with_an_mcp_approval_request():
    events = project(held_journal())

    assert types(events)[-4:] == [
        "response.output_item.done",  # the held call's mcp_call, incomplete
        "response.output_item.added",
        "response.output_item.done",
        "response.incomplete",
    ]
    request = events[-2]["item"]
    assert request == {
        "id": INTERRUPT,
        "type": "mcp_approval_request",
        "server_label": "agent",
        "name": "calendar_create",
        "arguments": json.dumps(STANDUP),
    }
    assert events[-3]["item"] == request and events[-3]["output_index"] == 2
    held_call = events[-4]["item"]
    assert held_call["id"] == "mcp_call_c1" and held_call["status"] == "incomplete"
    assert held_call["approval_request_id"] == INTERRUPT
    response = events[-1]["response"]
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": None}
    assert response["usage"] == USAGE and response["error"] is None
    assert [(item["type"], item.get("status")) for item in response["output"]] == [
        ("mcp_call", "incomplete"),
        ("mcp_call", "completed"),
        ("mcp_approval_request", None),
    ]
    # The Response object read from the stored rows (the run row says completed) is the
    # terminal event's.
    rebuilt = response_of_journal(
        head=HEAD, payloads=held_journal(), status="completed", usage=USAGE
    )
    assert rebuilt == response


def test_the_response_that_answers_gives_the_held_call_as_an_mcp_call_naming_its_request():
    projection = ResponseProjection(HEAD, {"call_c1": INTERRUPT})
    events: list[dict[str, Any]] = []
    for payload in continued_journal():
        events += projection.translate(payload, usage=USAGE if is_terminal(payload) else None)
    for event in events:
        EVENTS.validate_python(event)

    assert types(events)[2:5] == [
        "response.output_item.added",
        "response.mcp_call.completed",
        "response.output_item.done",
    ]
    assert events[2]["item"]["status"] == "in_progress"
    assert events[4]["item"] == {
        "id": "mcp_call_c1",
        "type": "mcp_call",
        "name": "calendar_create",
        "server_label": "agent",
        "arguments": json.dumps(STANDUP),
        "approval_request_id": INTERRUPT,
        "output": '{"id": 1}',
        "error": None,
        "status": "completed",
    }
    final = events[-1]["response"]
    assert events[-1]["type"] == "response.completed" and final["incomplete_details"] is None
    assert [item["type"] for item in final["output"]] == ["mcp_call", "message"]


def test_a_rejected_approval_is_a_failed_mcp_call_saying_the_user_declined():
    response = response_of_journal(
        head=HEAD,
        payloads=continued_journal(status="failure"),
        status="completed",
        usage=USAGE,
        approvals={"call_c1": INTERRUPT},
    )

    call = response["output"][0]
    assert call["status"] == "failed" and call["approval_request_id"] == INTERRUPT
    assert call["error"] == {
        "type": "mcp_tool_execution_error",
        "content": "The user declined this call: not now",
    }
    assert response["status"] == "completed"


def test_a_result_of_a_call_no_approval_held_is_not_an_item():
    # (a client's tool result, say: the client has it already)
    response = response_of_journal(
        head=HEAD, payloads=continued_journal(), status="completed", usage=USAGE
    )
    assert [item["type"] for item in response["output"]] == ["message"]
