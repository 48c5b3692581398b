"""How a run ends for an AG-UI 1.0 client (outbound.py): pure, no database."""

from typing import Any

from agent_runs.protocols.agui.outbound import ClientEvents

IDS = {"threadId": "t-1", "runId": "r-1"}


def translated(journal: list[dict[str, Any]]) -> list[dict[str, Any]]:
    translate = ClientEvents()
    return [event for payload in journal for event in translate(payload)]


def test_a_run_starts_with_the_protocol_version_and_finishes_with_success():
    events = translated(
        [
            {"type": "RUN_STARTED", **IDS},
            {"type": "STEP_STARTED", "stepName": "worker", **IDS},
            {"type": "STEP_FINISHED", "stepName": "worker", **IDS},
            {"type": "RUN_FINISHED", **IDS},
        ]
    )

    assert events[0] == {"type": "RUN_STARTED", **IDS, "protocolVersion": "1.0"}
    assert events[-1] == {"type": "RUN_FINISHED", **IDS, "outcome": {"type": "success"}}


def test_a_run_cancelled_mid_answer_ends_what_it_left_open_then_finishes_cancelled():
    events = translated(
        [
            {"type": "RUN_STARTED", **IDS},
            {"type": "STEP_STARTED", "stepName": "router", **IDS},
            {"type": "STEP_FINISHED", "stepName": "router", **IDS},
            {"type": "STEP_STARTED", "stepName": "worker", **IDS},
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "calendar_list"},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "calendar_list"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Once"},
            {"type": "RUN_ERROR", "code": "cancelled", "message": "run cancelled", **IDS},
        ]
    )

    assert events[-4:] == [
        {"type": "TOOL_CALL_END", "toolCallId": "c2"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "STEP_FINISHED", "stepName": "worker"},
        {
            "type": "RUN_FINISHED",
            **IDS,
            "outcome": {"type": "cancelled"},
            "metadata": {"code": "cancelled", "message": "run cancelled"},
        },
    ]
    assert "RUN_ERROR" not in [event["type"] for event in events]


def test_a_queued_run_cancelled_is_started_then_finished_cancelled():
    events = translated(
        [
            {"type": "RUN_STARTED", **IDS},
            {"type": "RUN_ERROR", "code": "cancelled", "message": "run cancelled", **IDS},
        ]
    )

    assert [(event["type"], event.get("outcome")) for event in events] == [
        ("RUN_STARTED", None),
        ("RUN_FINISHED", {"type": "cancelled"}),
    ]


def test_a_failure_is_still_a_run_error():
    failure = {"type": "RUN_ERROR", "code": "model_error", "message": "runtime execution failed"}

    events = translated(
        [
            {"type": "RUN_STARTED", **IDS},
            {"type": "STEP_STARTED", "stepName": "worker", **IDS},
            {**failure, **IDS},
        ]
    )

    assert events[-1] == {"type": "RUN_ERROR", **failure, "metadata": IDS}


def test_a_later_run_of_the_stream_starts_with_nothing_open():
    translate = ClientEvents()
    for payload in (
        {"type": "RUN_STARTED", **IDS},
        {"type": "STEP_STARTED", "stepName": "worker", **IDS},
        {"type": "RUN_ERROR", "code": "model_error", "message": "failed", **IDS},
    ):
        translate(payload)

    translate({"type": "RUN_STARTED", **IDS})
    ended = translate({"type": "RUN_ERROR", "code": "cancelled", "message": "run cancelled"})

    assert [event["type"] for event in ended] == ["RUN_FINISHED"]


def test_a_run_cancelled_mid_reasoning_ends_its_reasoning_message_then_its_span():
    events = translated(
        [
            {"type": "RUN_STARTED", **IDS},
            {"type": "STEP_STARTED", "stepName": "worker", **IDS},
            {"type": "REASONING_START", "messageId": "r1", "stage": "worker", **IDS},
            {"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning", **IDS},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "Hmm", **IDS},
            {"type": "RUN_ERROR", "code": "cancelled", "message": "run cancelled", **IDS},
        ]
    )

    assert [(event["type"], event.get("messageId")) for event in events[-4:]] == [
        ("REASONING_MESSAGE_END", "r1"),
        ("REASONING_END", "r1"),
        ("STEP_FINISHED", None),
        ("RUN_FINISHED", None),
    ]
    # The fields AG-UI does not define for a reasoning event move into its metadata.
    started = next(event for event in events if event["type"] == "REASONING_START")
    assert started == {
        "type": "REASONING_START",
        "messageId": "r1",
        "metadata": {"stage": "worker", **IDS},
    }
