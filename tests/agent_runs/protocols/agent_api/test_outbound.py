"""The Agent API's stream of a run's journal (outbound.py): golden objects, no database."""

import json
from typing import Any

from agent_runs.protocols.agent_api.outbound import (
    ResponseFacts,
    ResponseStream,
    response_current,
    response_objects,
)

RESPONSE = "response_6f1c2a52-8a0e-4c59-9d1b-0c0f4f3e9a11"
IDS = {"threadId": "0d3c6b1e-7a55-4f0e-9d53-3a2b1c0d9e8f", "runId": RESPONSE}
FACTS = ResponseFacts(response_id=RESPONSE, session_id="s1", created_at=1795397400)
ENDED = ResponseFacts(
    response_id=RESPONSE,
    session_id="s1",
    created_at=1795397400,
    completed_at=1795397402,
    usage={"input_tokens": 11, "output_tokens": 5, "total_tokens": 16},
    request={"model": "qwen-max"},
)


def text_journal() -> list[dict[str, Any]]:
    message = {"messageId": "worker-1", **IDS}
    return [
        {"type": "RUN_STARTED", **IDS},
        {"type": "STEP_STARTED", "stepName": "router", **IDS},
        {"type": "STEP_FINISHED", "stepName": "router", **IDS},
        {"type": "STEP_STARTED", "stepName": "worker", **IDS},
        {"type": "TEXT_MESSAGE_START", "role": "assistant", **message},
        {"type": "TEXT_MESSAGE_CONTENT", "delta": "Hel", **message},
        {"type": "TEXT_MESSAGE_CONTENT", "delta": "lo", **message},
        {"type": "TEXT_MESSAGE_END", "answer": "Hello", "status": "success", **message},
        {"type": "STEP_FINISHED", "stepName": "worker", **IDS},
        {"type": "RUN_FINISHED", **IDS},
    ]


def tool_journal() -> list[dict[str, Any]]:
    tool = {"toolCallId": "call_1", "toolCallName": "calendar_list", "stage": "worker", **IDS}
    return [
        {"type": "RUN_STARTED", **IDS},
        {"type": "STEP_STARTED", "stepName": "worker", **IDS},
        {"type": "TOOL_CALL_START", "messageId": "worker-1", "parentMessageId": "w", **tool},
        {"type": "TOOL_CALL_ARGS", "delta": '{"day": ', "args": {}, **tool},
        {"type": "TOOL_CALL_ARGS", "delta": '"today"}', "args": {"day": "today"}, **tool},
        {"type": "TOOL_CALL_END", **tool},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "tool-call_1",
            "toolCallId": "call_1",
            "tool_call_id": "call_1",
            "tool_name": "calendar_list",
            "content": '{"count": 0}',
            "role": "tool",
            "status": "success",
            **IDS,
        },
        {"type": "STEP_FINISHED", "stepName": "worker", **IDS},
        {"type": "RUN_FINISHED", **IDS},
    ]


def response(sequence: int, status: str, **fields: Any) -> dict[str, Any]:
    final = status in ("completed", "failed", "canceled")
    body = {
        "sequence_number": sequence,
        "object": "response",
        "status": status,
        "id": RESPONSE,
        "created_at": 1795397400,
        "completed_at": 1795397402 if final else None,
        "error": None,
        "output": None,
        "usage": {"input_tokens": 11, "output_tokens": 5, "total_tokens": 16} if final else None,
        "session_id": "s1",
        "model": "qwen-max",
    }
    body.update(fields)
    return body


def message(sequence: int, msg_id: str, status: str, content: Any, **fields: Any) -> dict[str, Any]:
    return {
        "sequence_number": sequence,
        "object": "message",
        "status": status,
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "content": content,
        "metadata": {},
        **fields,
    }


def content(sequence: int | None, msg_id: str, status: str, **fields: Any) -> dict[str, Any]:
    body = {"object": "content", "status": status, "index": 0, "msg_id": msg_id, **fields}
    return body if sequence is None else {"sequence_number": sequence, **body}


def stream_of(journal: list[dict[str, Any]], facts: ResponseFacts = ENDED) -> list[dict[str, Any]]:
    """As the live stream makes them: facts read at the end, before the terminal event."""
    stream = ResponseStream(facts)
    objects = stream.created()
    for payload in journal:
        objects += stream.objects(payload)
    return objects


def test_a_text_run_streams_created_in_progress_the_message_its_deltas_and_completed():
    objects = stream_of(text_journal())

    msg = objects[2]["id"]
    assert msg.startswith("msg_")
    whole = content(None, msg, "completed", type="text", delta=False, text="Hello")
    done = message(7, msg, "completed", [whole])
    del done["sequence_number"]
    assert objects == [
        response(0, "created", usage=None, completed_at=None),
        response(1, "in_progress", usage=None, completed_at=None),
        message(2, msg, "in_progress", None),
        content(3, msg, "in_progress", type="text", delta=True, text="Hel"),
        content(4, msg, "in_progress", type="text", delta=True, text="lo"),
        content(5, msg, "completed", type="text", delta=False, text="Hello"),
        message(6, msg, "completed", [whole]),
        response(7, "completed", output=[done]),
    ]


def test_a_tool_run_streams_a_function_call_and_its_output_as_data_messages():
    objects = stream_of(tool_journal())

    call, output = objects[2]["id"], objects[5]["id"]
    arguments = {"call_id": "call_1", "name": "calendar_list", "arguments": '{"day": "today"}'}
    result = {"call_id": "call_1", "name": "calendar_list", "output": '{"count": 0}'}
    call_data = content(None, call, "completed", type="data", delta=False, data=arguments)
    output_data = content(None, output, "completed", type="data", delta=False, data=result)
    call_fields = {"type": "function_call"}
    output_fields = {"type": "function_call_output", "role": "tool"}
    completed_call = message(4, call, "completed", [call_data], **call_fields)
    completed_output = message(7, output, "completed", [output_data], **output_fields)
    assert objects == [
        response(0, "created", usage=None, completed_at=None),
        response(1, "in_progress", usage=None, completed_at=None),
        message(2, call, "in_progress", None, **call_fields),
        {"sequence_number": 3, **call_data},
        completed_call,
        message(5, output, "in_progress", None, **output_fields),
        {"sequence_number": 6, **output_data},
        completed_output,
        response(
            8,
            "completed",
            output=[
                {k: v for k, v in completed_call.items() if k != "sequence_number"},
                {k: v for k, v in completed_output.items() if k != "sequence_number"},
            ],
        ),
    ]


def test_a_failure_leaves_the_open_message_incomplete_and_fails_with_the_specs_error():
    error = {"type": "RUN_ERROR", "code": "model_error", "message": "runtime execution failed"}
    journal = [*text_journal()[:6], {**error, **IDS}]

    objects = stream_of(journal)

    msg = objects[2]["id"]
    partial = content(None, msg, "incomplete", type="text", delta=False, text="Hel")
    incomplete = message(4, msg, "incomplete", [partial])
    error = {"code": "model_error", "message": "runtime execution failed"}
    assert objects[3:] == [
        content(3, msg, "in_progress", type="text", delta=True, text="Hel"),
        incomplete,
        response(
            5,
            "failed",
            error=error,
            output=[{k: v for k, v in incomplete.items() if k != "sequence_number"}],
        ),
    ]


def test_a_cancel_ends_the_response_canceled_with_no_error():
    journal = [
        {"type": "RUN_STARTED", **IDS},
        {"type": "STEP_STARTED", "stepName": "router", **IDS},
        {"type": "RUN_ERROR", "code": "cancelled", "message": "run cancelled", **IDS},
    ]

    assert stream_of(journal) == [
        response(0, "created", usage=None, completed_at=None),
        response(1, "in_progress", usage=None, completed_at=None),
        response(2, "canceled", output=[]),
    ]


def test_a_replay_is_the_live_stream_byte_for_byte_and_message_ids_are_stable():
    live = stream_of(tool_journal())
    replay = response_objects(ENDED, tool_journal())

    assert json.dumps(replay) == json.dumps(live)
    assert [o["sequence_number"] for o in live] == list(range(len(live)))
    other = response_objects(
        ResponseFacts(response_id="response_other", session_id="s1", created_at=0), tool_journal()
    )
    assert other[2]["id"] != live[2]["id"]  # ids are per response


def test_the_current_object_is_the_latest_response_object_or_the_end_the_run_row_says():
    started = text_journal()[:6]

    assert response_current(FACTS, [])["status"] == "created"
    in_progress = response(1, "in_progress", usage=None, completed_at=None)
    del in_progress["model"]  # FACTS keep no request fields
    assert response_current(FACTS, started) == in_progress
    assert response_current(ENDED, text_journal()) == stream_of(text_journal())[-1]
    # Cancelled while queued behind another run: the final object its journal will give.
    journal_to_come = [
        {"type": "RUN_STARTED", **IDS},
        {"type": "RUN_ERROR", "code": "cancelled", "message": "run cancelled", **IDS},
    ]
    final = stream_of(journal_to_come)[-1]
    assert response_current(ENDED, [], cancelled=True) == final
    assert response_current(ENDED, journal_to_come[:1], cancelled=True) == final
    assert response_current(ENDED, journal_to_come, cancelled=True) == final


def test_nothing_follows_the_terminal_event():
    stream = ResponseStream(ENDED)
    stream.created()
    for payload in text_journal():
        stream.objects(payload)

    assert stream.objects({"type": "RUN_STARTED", **IDS}) == []
