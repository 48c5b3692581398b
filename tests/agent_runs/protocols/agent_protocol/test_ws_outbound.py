"""The WebSocket frames of a task's journal (outbound_ws.py): golden frames, no database."""

from typing import Any

from agent_runs.models import agent_step_id
from agent_runs.protocols.agent_protocol.outbound_ws import (
    FrameState,
    artifact_frames,
    event_frames,
    finished_step_id,
)

TASK = "6f1c2a52-8a0e-4c59-9d1b-0c0f4f3e9a11"
RUN = "run-001"
IDS = {"threadId": TASK, "runId": RUN}


def step(stage: str, run: str = RUN) -> str:
    return str(agent_step_id(thread_id=TASK, run_id=run, stage=stage))


def journal_with_a_tool() -> list[dict[str, Any]]:
    """A run's events as the journal stores them (the codec's wire JSON)."""
    tool = {"toolCallId": "call_1", "toolCallName": "calendar_list", "stage": "worker", **IDS}
    return [
        {"type": "RUN_STARTED", **IDS},
        {"type": "STEP_STARTED", "stepName": "router", **IDS},
        {"type": "STEP_FINISHED", "stepName": "router", **IDS},
        {"type": "STEP_STARTED", "stepName": "worker", **IDS},
        {"type": "TOOL_CALL_START", "parentMessageId": "m1", "messageId": "m1", **tool},
        {"type": "TOOL_CALL_ARGS", "delta": '{"day": "today"}', "args": {"day": "today"}, **tool},
        {"type": "TOOL_CALL_END", **tool},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "tool-call_1",
            "toolCallId": "call_1",
            "tool_call_id": "call_1",
            "content": '{"events": []}',
            "role": "tool",
            "stage": "worker",
            "tool_name": "calendar_list",
            "status": "success",
            "result": '{"events": []}',
            "error": None,
            **IDS,
        },
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant", **IDS},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Nothing ", **IDS},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "today.", **IDS},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1", "answer": "Nothing today.", **IDS},
        {"type": "STEP_FINISHED", "stepName": "worker", **IDS},
        {"type": "RUN_FINISHED", **IDS},
    ]


def project(
    payloads: list[dict[str, Any]], state: FrameState | None = None, first_id: int = 1
) -> list[dict[str, Any]]:
    state = state or FrameState()
    frames: list[dict[str, Any]] = []
    for offset, payload in enumerate(payloads):
        frames += event_frames(
            task_id=TASK, event_id=first_id + offset, payload=payload, state=state
        )
    return frames


STAGE_OF = {step(stage): stage for stage in ("router", "worker", "memory")}


def brief(frame: dict[str, Any]) -> tuple[Any, ...]:
    """A frame as (type, its step's stage, data, event id); every frame names the task."""
    assert frame["task_id"] == TASK
    assert set(frame) <= {"type", "task_id", "step_id", "data", "event_id"}
    return frame["type"], STAGE_OF.get(frame.get("step_id", "")), frame["data"], frame["event_id"]


def test_a_run_with_a_tool_gives_the_specs_task_step_and_log_frames():
    frames = project(journal_with_a_tool())

    assert [brief(frame) for frame in frames] == [
        ("task.created", None, {"cycle_id": RUN}, 1),
        ("task.started", None, {"cycle_id": RUN}, 1),
        ("step.created", "router", {"name": "router"}, 2),
        ("step.started", "router", {"name": "router"}, 2),
        ("step.completed", "router", {"name": "router"}, 3),
        ("step.created", "worker", {"name": "worker"}, 4),
        ("step.started", "worker", {"name": "worker"}, 4),
        ("log", "worker", "tool calendar_list called", 5),
        ("log", "worker", 'tool calendar_list arguments: {"day": "today"}', 6),
        ("log", "worker", 'tool calendar_list succeeded: {"events": []}', 8),
        ("step.running", "worker", {"delta": "Nothing "}, 10),
        ("step.running", "worker", {"delta": "today."}, 11),
        ("step.completed", "worker", {"name": "worker"}, 13),
        ("task.completed", None, {"cycle_id": RUN}, 14),
    ]
    assert frames[2] == {
        "type": "step.created",
        "task_id": TASK,
        "step_id": str(agent_step_id(thread_id=TASK, run_id=RUN, stage="router")),
        "data": {"name": "router"},
        "event_id": 2,
    }


def test_a_later_run_of_the_task_is_started_but_not_created_again():
    second = {"threadId": TASK, "runId": "run-002"}
    frames = project(
        [
            {"type": "RUN_STARTED", **IDS},
            {"type": "RUN_FINISHED", **IDS},
            {"type": "RUN_STARTED", **second},
        ]
    )

    assert [(f["type"], f["data"]["cycle_id"]) for f in frames] == [
        ("task.created", RUN),
        ("task.started", RUN),
        ("task.completed", RUN),
        ("task.started", "run-002"),
    ]


def test_a_stream_started_after_the_tasks_first_event_sends_no_task_created():
    frames = project([{"type": "RUN_STARTED", **IDS}], FrameState(journal_begun=True))

    assert [frame["type"] for frame in frames] == ["task.started"]


def test_a_failure_fails_the_open_step_then_the_task():
    frames = project(
        [
            {"type": "RUN_STARTED", **IDS},
            {"type": "STEP_STARTED", "stepName": "worker", **IDS},
            {
                "type": "RUN_ERROR",
                "code": "model_error",
                "message": "runtime execution failed",
                **IDS,
            },
        ]
    )

    assert frames[-2:] == [
        {
            "type": "step.failed",
            "task_id": TASK,
            "step_id": step("worker"),
            "data": {
                "name": "worker",
                "code": "model_error",
                "message": "runtime execution failed",
            },
            "event_id": 3,
        },
        {
            "type": "task.failed",
            "task_id": TASK,
            "data": {"cycle_id": RUN, "code": "model_error", "message": "runtime execution failed"},
            "event_id": 3,
        },
    ]


def test_a_cancel_fails_the_open_step_and_cancels_the_task():
    frames = project(
        [
            {"type": "RUN_STARTED", **IDS},
            {"type": "STEP_STARTED", "stepName": "router", **IDS},
            {"type": "RUN_ERROR", "code": "cancelled", "message": "run cancelled", **IDS},
        ]
    )

    assert [(f["type"], f.get("step_id")) for f in frames[-2:]] == [
        ("step.failed", step("router")),
        ("task.cancelled", None),
    ]
    assert frames[-1]["data"] == {"cycle_id": RUN}


def test_a_run_cancelled_between_steps_or_while_queued_fails_no_step():
    frames = project(
        [
            {"type": "RUN_STARTED", **IDS},
            {"type": "RUN_ERROR", "code": "cancelled", "message": "run cancelled", **IDS},
        ]
    )

    assert [frame["type"] for frame in frames] == ["task.created", "task.started", "task.cancelled"]


def test_a_pause_and_a_resume_are_task_frames_of_the_run_they_are_in():
    # The core's CUSTOM events name no run: the frame names the run the journal is in.
    frames = project(
        [
            {"type": "RUN_STARTED", **IDS},
            {"type": "STEP_STARTED", "stepName": "router", **IDS},
            {"type": "STEP_FINISHED", "stepName": "router", **IDS},
            {
                "type": "CUSTOM",
                "name": "run_paused",
                "value": {"reason": "pause", "next_stage": "worker"},
            },
            {"type": "CUSTOM", "name": "run_resumed", "value": {"next_stage": "worker"}},
            {"type": "CUSTOM", "name": "something_else", "value": {}},
        ]
    )

    assert frames[-2:] == [
        {
            "type": "task.paused",
            "task_id": TASK,
            "data": {"cycle_id": RUN, "reason": "pause", "next_stage": "worker"},
            "event_id": 4,
        },
        {
            "type": "task.resumed",
            "task_id": TASK,
            "data": {"cycle_id": RUN, "next_stage": "worker"},
            "event_id": 5,
        },
    ]


def test_a_failed_tool_is_logged_with_its_error_and_long_text_is_clipped():
    payload = {
        "type": "TOOL_CALL_RESULT",
        "tool_name": "calendar_create",
        "stage": "worker",
        "status": "failure",
        "content": "x" * 2000,
        "error": "y" * 2000,
        **IDS,
    }

    (frame,) = project([payload], FrameState(journal_begun=True))

    assert frame["data"].startswith("tool calendar_create failed: yyy")
    assert frame["data"].endswith("…") and len(frame["data"]) < 600
    assert frame["step_id"] == step("worker")


def test_a_timestamp_is_sent_only_when_the_event_has_one():
    stamped = {"type": "RUN_STARTED", "timestamp": 1_705_314_600_123, **IDS}

    frames = project([stamped, {"type": "RUN_FINISHED", **IDS}])

    assert [frame.get("timestamp") for frame in frames] == [
        "2024-01-15T10:30:00.123Z",
        "2024-01-15T10:30:00.123Z",
        None,
    ]
    assert "timestamp" not in frames[-1]


def test_a_stream_started_at_a_later_run_gives_the_frames_the_whole_journal_gave():
    second = [{**payload, "runId": "run-002"} for payload in journal_with_a_tool()]
    journal = journal_with_a_tool() + second
    whole = project(journal)

    # What a resume in the second run does: start a state at that run's first event.
    from_second = project(second, FrameState(journal_begun=True), first_id=len(journal) // 2 + 1)

    assert from_second == [frame for frame in whole if frame["event_id"] > len(journal) // 2]
    assert project(journal) == whole  # the same events, the same frames


def test_events_with_nothing_to_say_give_no_frames():
    quiet: list[dict[str, Any]] = [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant", **IDS},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1", **IDS},
        {"type": "TOOL_CALL_END", "toolCallId": "c", **IDS},
        {"type": "STATE_SNAPSHOT", "snapshot": {}, **IDS},
    ]

    assert project(quiet, FrameState(journal_begun=True)) == []


def test_a_finished_step_names_its_step_for_its_files():
    finished = {"type": "STEP_FINISHED", "stepName": "worker", **IDS}

    assert finished_step_id(task_id=TASK, payload=finished) == step("worker")
    assert finished_step_id(task_id=TASK, payload={"type": "STEP_STARTED", **IDS}) is None


def test_artifact_frames_carry_the_file_and_the_event_that_announced_it():
    artifact = {
        "id": "0b7d0f4e-1f55-4a86-9a67-2d6a1b0c9e01",
        "file_name": "answer.md",
        "relative_path": "answer.md",
        "mime_type": "text/markdown",
        "size_bytes": 14,
    }

    frames = artifact_frames(
        task_id=TASK,
        event_id=13,
        payload={"type": "STEP_FINISHED", "stepName": "worker", **IDS},
        step_id=step("worker"),
        artifacts=[artifact],
    )

    assert frames == [
        {
            "type": "artifact.created",
            "task_id": TASK,
            "step_id": step("worker"),
            "artifact_id": artifact["id"],
            "data": {
                "file_name": "answer.md",
                "relative_path": "answer.md",
                "mime_type": "text/markdown",
                "size_bytes": 14,
            },
            "event_id": 13,
        }
    ]
