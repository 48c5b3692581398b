"""A task's journals as A2A stream responses and Task objects (outbound.py): golden objects,
read back by the SDK's own types and its 0.3 conversions, no database."""

from typing import Any

from a2a.compat.v0_3 import conversions
from a2a.types.a2a_pb2 import StreamResponse
from google.protobuf.json_format import ParseDict

from agent_runs.protocols.a2a.outbound import TaskProjection

TASK = "0b8f8d7e-5d1c-4a8e-9f3b-2c1d0e9f8a77"
CONTEXT = "6f1c2a52-8a0e-4c59-9d1b-0c0f4f3e9a11"
IDS = {"threadId": CONTEXT, "runId": TASK}
ON = {"taskId": TASK, "contextId": CONTEXT}
HELLO = {"messageId": "u1", "role": "ROLE_USER", "parts": [{"text": "Hello"}]}


def text_journal(
    answer: tuple[str, ...] = ("Hel", "lo"), result_type: str = "unknown"
) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", **IDS},
        {"type": "STEP_STARTED", "stepName": "worker", **IDS},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant", **IDS},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": d, **IDS} for d in answer),
        {"type": "TEXT_MESSAGE_END", "messageId": "m1", "resultType": result_type, **IDS},
        {"type": "STEP_FINISHED", "stepName": "worker", **IDS},
        {"type": "RUN_FINISHED", **IDS},
    ]


def projection() -> TaskProjection:
    task = TaskProjection(task_id=TASK, context_id=CONTEXT)
    task.user_message(HELLO)
    return task


def stream(journal: list[dict[str, Any]]) -> list[dict[str, Any]]:
    task = projection()
    sent = task.submitted()
    for payload in journal:
        sent += task.translate(payload)
    return sent


def test_a_text_answer_streams_in_the_sdk_s_order():
    sent = stream(text_journal())

    assert sent == [
        {
            "task": {
                "id": TASK,
                "contextId": CONTEXT,
                "status": {"state": "TASK_STATE_SUBMITTED"},
                "history": [{**HELLO, **ON}],
            }
        },
        {"statusUpdate": {**ON, "status": {"state": "TASK_STATE_WORKING"}}},
        {
            "statusUpdate": {
                **ON,
                "status": {"state": "TASK_STATE_WORKING"},
                "metadata": {"stage": "worker", "step": "started"},
            }
        },
        {
            "artifactUpdate": {
                **ON,
                "artifact": {"artifactId": "m1", "name": "answer", "parts": [{"text": "Hel"}]},
            }
        },
        {
            "artifactUpdate": {
                **ON,
                "artifact": {"artifactId": "m1", "name": "answer", "parts": [{"text": "lo"}]},
                "append": True,
            }
        },
        {
            "artifactUpdate": {
                **ON,
                "artifact": {"artifactId": "m1", "name": "answer", "parts": [{"text": ""}]},
                "append": True,
                "lastChunk": True,
            }
        },
        {
            "statusUpdate": {
                **ON,
                "status": {"state": "TASK_STATE_WORKING"},
                "metadata": {"stage": "worker", "step": "finished"},
            }
        },
        {"statusUpdate": {**ON, "status": {"state": "TASK_STATE_COMPLETED"}}},
    ]
    # Each reads back as the SDK's types, in both generations.
    for obj in sent:
        conversions.to_compat_stream_response(ParseDict(obj, StreamResponse()), 1)


def test_a_replay_equals_the_live_stream_and_nothing_follows_the_end():
    journal = text_journal()
    live = stream(journal)

    assert stream(journal) == live
    assert stream([*journal, {"type": "RUN_STARTED", **IDS}]) == live


def test_the_task_holds_the_history_and_the_whole_answer():
    task = projection()
    task.feed(text_journal())

    whole = task.task()
    assert whole["status"] == {"state": "TASK_STATE_COMPLETED"}
    assert [m["role"] for m in whole["history"]] == ["ROLE_USER", "ROLE_AGENT"]
    assert whole["history"][1]["parts"] == [{"text": "Hello"}]
    assert whole["artifacts"] == [
        {"artifactId": "m1", "name": "answer", "parts": [{"text": "Hello"}]}
    ]
    assert [m["role"] for m in task.task(history_length=1)["history"]] == ["ROLE_AGENT"]
    assert "history" not in task.task(history_length=0)


def test_a_clarification_asks_for_input_with_the_question():
    sent = stream(text_journal(("Which ", "one?"), result_type="clarification"))

    last = sent[-1]["statusUpdate"]["status"]
    assert last["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert last["message"]["role"] == "ROLE_AGENT"
    assert last["message"]["parts"] == [{"text": "Which one?"}]


def test_a_follow_up_run_submits_the_task_again():
    task = projection()
    task.feed(text_journal(result_type="clarification"))
    task.user_message({"messageId": "u2", "role": "ROLE_USER", "parts": [{"text": "This"}]})

    assert task.task()["status"] == {"state": "TASK_STATE_SUBMITTED"}
    assert task.translate({"type": "RUN_STARTED", **IDS})[0]["statusUpdate"]["status"] == {
        "state": "TASK_STATE_WORKING"
    }


def test_tool_calls_are_working_updates_with_data_parts():
    tool = {"toolCallId": "call_1", "toolCallName": "calendar_list", **IDS}
    sent = stream(
        [
            {"type": "RUN_STARTED", **IDS},
            {"type": "TOOL_CALL_START", **tool},
            {"type": "TOOL_CALL_ARGS", "delta": '{"day": ', **tool},
            {"type": "TOOL_CALL_ARGS", "delta": '"today"}', **tool},
            {"type": "TOOL_CALL_END", **tool},
            {"type": "TOOL_CALL_RESULT", "toolCallId": "call_1", "content": "[]", **IDS},
        ]
    )

    call, result = (obj["statusUpdate"]["status"] for obj in sent[2:])
    assert call["state"] == result["state"] == "TASK_STATE_WORKING"
    assert call["message"]["parts"] == [
        {
            "data": {
                "toolCall": {"id": "call_1", "name": "calendar_list", "arguments": {"day": "today"}}
            },
            "mediaType": "application/json",
        }
    ]
    assert result["message"]["parts"][0]["data"] == {
        "toolResult": {"id": "call_1", "name": "calendar_list", "content": []}
    }


def test_a_failure_and_a_cancel_end_the_task():
    failed = stream([{"type": "RUN_STARTED", **IDS}, {"type": "RUN_ERROR", "message": "boom"}])
    canceled = stream(
        [{"type": "RUN_STARTED", **IDS}, {"type": "RUN_ERROR", "code": "cancelled", "message": "x"}]
    )

    status = failed[-1]["statusUpdate"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"] == [{"text": "boom"}]
    assert canceled[-1]["statusUpdate"]["status"] == {"state": "TASK_STATE_CANCELED"}
