"""The WebSocket frames of a task's journal (outbound_ws.py): golden frames, no database."""

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from agent_runs.models import agent_step_id
from agent_runs.protocols.agent_protocol.outbound import approval_step_id
from agent_runs.protocols.agent_protocol.outbound_ws import (
    FrameCursor,
    FrameState,
    HeldRun,
    event_frames,
    finished_step_id,
    frame_cursor,
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


T0 = datetime(2024, 1, 15, 10, 30, tzinfo=UTC)


def written(event_id: int) -> datetime:
    """When the test's journal event ``event_id`` was written: a second apart, and a few
    microseconds past the millisecond."""
    return T0 + timedelta(seconds=event_id, microseconds=123_456)


def stamp(event_id: int) -> str:
    return f"2024-01-15T10:30:{event_id:02d}.123Z"


def project(
    payloads: list[dict[str, Any]], state: FrameState | None = None, first_id: int = 1
) -> list[dict[str, Any]]:
    state = state or FrameState()
    frames: list[dict[str, Any]] = []
    for offset, payload in enumerate(payloads):
        event_id = first_id + offset
        frames += event_frames(
            task_id=TASK, event_id=event_id, at=written(event_id), payload=payload, state=state
        )
    return frames


STAGE_OF = {step(stage): stage for stage in ("router", "worker", "memory")}


def brief(frame: dict[str, Any]) -> tuple[Any, ...]:
    """A frame as (type, its step's stage, data, cursor); every frame names the task and has
    the time of its journal event."""
    assert frame["task_id"] == TASK
    assert set(frame) <= {"type", "task_id", "step_id", "data", "timestamp", "event_id"}
    assert frame["timestamp"] == stamp(int(frame["event_id"].split(".")[0]))
    return frame["type"], STAGE_OF.get(frame.get("step_id", "")), frame["data"], frame["event_id"]


def test_a_run_with_a_tool_gives_the_specs_task_step_and_log_frames():
    frames = project(journal_with_a_tool())

    assert [brief(frame) for frame in frames] == [
        ("task.created", None, {"cycle_id": RUN}, "1.1"),
        ("task.started", None, {"cycle_id": RUN}, "1.2"),
        ("step.created", "router", {"name": "router"}, "2.1"),
        ("step.started", "router", {"name": "router"}, "2.2"),
        ("step.completed", "router", {"name": "router"}, "3.1"),
        ("step.created", "worker", {"name": "worker"}, "4.1"),
        ("step.started", "worker", {"name": "worker"}, "4.2"),
        ("log", "worker", "tool calendar_list called", "5.1"),
        ("log", "worker", 'tool calendar_list arguments: {"day": "today"}', "6.1"),
        ("log", "worker", 'tool calendar_list succeeded: {"events": []}', "8.1"),
        ("step.running", "worker", {"delta": "Nothing "}, "10.1"),
        ("step.running", "worker", {"delta": "today."}, "11.1"),
        ("step.completed", "worker", {"name": "worker"}, "13.1"),
        ("task.completed", None, {"cycle_id": RUN}, "14.1"),
    ]
    assert frames[2] == {
        "type": "step.created",
        "task_id": TASK,
        "step_id": str(agent_step_id(thread_id=TASK, run_id=RUN, stage="router")),
        "data": {"name": "router"},
        "timestamp": "2024-01-15T10:30:02.123Z",
        "event_id": "2.1",
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
            "timestamp": stamp(3),
            "event_id": "3.1",
        },
        {
            "type": "task.failed",
            "task_id": TASK,
            "data": {"cycle_id": RUN, "code": "model_error", "message": "runtime execution failed"},
            "timestamp": stamp(3),
            "event_id": "3.2",
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
            "timestamp": stamp(4),
            "event_id": "4.1",
        },
        {
            "type": "task.resumed",
            "task_id": TASK,
            "data": {"cycle_id": RUN, "next_stage": "worker"},
            "timestamp": stamp(5),
            "event_id": "5.1",
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


def test_a_frame_has_the_time_its_journal_event_was_written_in_utc():
    # Not the AG-UI event's own optional timestamp: the journal's, which the live stream and
    # a replay both have.
    stamped = {"type": "RUN_STARTED", "timestamp": 1_000, **IDS}
    later = datetime(2024, 1, 15, 12, 30, 5, 999_999, tzinfo=timezone(timedelta(hours=2)))

    frames = event_frames(task_id=TASK, event_id=7, at=later, payload=stamped, state=FrameState())

    assert [frame["timestamp"] for frame in frames] == ["2024-01-15T10:30:05.999Z"] * 2


def test_a_cursor_resumes_after_its_frame_or_after_its_whole_event():
    after_second = frame_cursor("67.2")
    whole_event = frame_cursor(67)

    assert after_second == FrameCursor(67, 2) and str(after_second) == "67.2"
    assert frame_cursor("67") == whole_event == FrameCursor(67) and str(whole_event) == "67"
    assert frame_cursor("67.0") == FrameCursor(67, 0)  # before the event's first frame
    assert [after_second.sends(67, number) for number in (1, 2, 3)] == [False, False, True]
    assert [whole_event.sends(67, number) for number in (1, 2, 3)] == [False, False, False]
    assert not after_second.sends(66, 9) and after_second.sends(68, 1)


@pytest.mark.parametrize(
    "value", ["", "soon", "67.", ".1", "6 7", "67.1.2", "-1", "٣", 6.5, True, None, [67], 2**63]
)
def test_a_cursor_that_is_not_one_is_refused(value):
    with pytest.raises(ValueError):
        frame_cursor(value)


def test_a_resume_from_any_frame_of_the_journal_gives_each_later_frame_once():
    journal = journal_with_a_tool() + [
        {**payload, "runId": "run-002"} for payload in journal_with_a_tool()
    ]
    whole = project(journal)
    second_run = len(journal) // 2 + 1

    for position, frame in enumerate(whole):
        cursor = frame_cursor(frame["event_id"])
        # What the socket does: prime the projection from the start of the cursor's run,
        # send what comes after the cursor.
        first_id = 1 if cursor.event_id < second_run else second_run
        state = FrameState(journal_begun=first_id > 1)
        resumed = [
            later
            for later in project(journal[first_id - 1 :], state, first_id=first_id)
            if cursor.sends(*map(int, later["event_id"].split(".")))
        ]
        assert resumed == whole[position + 1 :], frame["event_id"]


def test_a_stream_started_at_a_later_run_gives_the_frames_the_whole_journal_gave():
    second = [{**payload, "runId": "run-002"} for payload in journal_with_a_tool()]
    journal = journal_with_a_tool() + second
    whole = project(journal)

    # What a resume in the second run does: start a state at that run's first event.
    from_second = project(second, FrameState(journal_begun=True), first_id=len(journal) // 2 + 1)

    assert from_second == [
        frame for frame in whole if int(frame["event_id"].split(".")[0]) > len(journal) // 2
    ]
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


def test_a_steps_files_come_first_among_the_frames_of_the_event_that_ends_it():
    artifact = {
        "id": "0b7d0f4e-1f55-4a86-9a67-2d6a1b0c9e01",
        "file_name": "answer.md",
        "relative_path": "answer.md",
        "mime_type": "text/markdown",
        "size_bytes": 14,
    }
    state = FrameState(journal_begun=True)
    event_frames(
        task_id=TASK,
        event_id=12,
        at=written(12),
        payload={"type": "STEP_STARTED", "stepName": "worker", **IDS},
        state=state,
    )

    frames = event_frames(
        task_id=TASK,
        event_id=13,
        at=written(13),
        payload={"type": "STEP_FINISHED", "stepName": "worker", **IDS},
        state=state,
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
            "timestamp": stamp(13),
            "event_id": "13.1",
        },
        {
            "type": "step.completed",
            "task_id": TASK,
            "step_id": step("worker"),
            "data": {"name": "worker"},
            "timestamp": stamp(13),
            "event_id": "13.2",
        },
    ]


def test_a_run_stopped_on_an_approval_pauses_the_task_and_the_run_going_on_resumes_it():
    interrupt = {
        "id": "int-1",
        "reason": "tool_approval",
        "message": "Allow calendar_create to run with these arguments?",
        "toolCallId": "call_1",
        "responseSchema": {"type": "object", "required": ["approved"]},
        "expiresAt": "2024-01-16T10:30:00Z",
        "metadata": {"toolName": "calendar_create", "arguments": {"title": "Standup"}},
    }
    held_run: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", **IDS},
        {"type": "STEP_STARTED", "stepName": "worker", **IDS},
        {"type": "STEP_FINISHED", "stepName": "worker", **IDS},
        {
            "type": "CUSTOM",
            "name": "run_interrupted",
            "value": {"interrupts": [interrupt], "pendingToolCallIds": []},
        },
        {"type": "RUN_FINISHED", **IDS},
    ]
    state = FrameState()
    frames = project(held_run, state)
    approval = str(approval_step_id(thread_id=TASK, run_id=RUN, interrupt_id="int-1"))
    went_on = {"threadId": TASK, "runId": "resume-1"}
    held = HeldRun(run_id=RUN, approvals=({"id": "int-1", "status": "resolved", "approved": True},))
    resumed = event_frames(
        task_id=TASK,
        event_id=6,
        at=written(6),
        payload={"type": "RUN_STARTED", **went_on},
        state=state,
        held=held,
    )

    assert [brief(frame)[0] for frame in frames] == [
        "task.created",
        "task.started",
        "step.created",
        "step.started",
        "step.completed",
        "step.created",
        "task.paused",
    ]  # and no task.completed: the task waits
    created, paused = frames[-2:]
    assert created["step_id"] == approval and created["event_id"] == "4.1"
    assert created["data"] == {"name": "approval", "interrupt": interrupt}
    assert paused["data"] == {
        "cycle_id": RUN,
        "reason": "approval",
        "interrupt_ids": ["int-1"],
        "pending_tool_call_ids": [],
    }
    assert [(frame["type"], frame.get("step_id"), frame["data"]) for frame in resumed] == [
        (
            "step.completed",
            approval,
            {
                "name": "approval",
                "interrupt_id": "int-1",
                "interrupt_status": "resolved",
                "approved": True,
            },
        ),
        ("task.resumed", None, {"cycle_id": "resume-1", "continues": RUN, "next_stage": "worker"}),
        ("task.started", None, {"cycle_id": "resume-1"}),
    ]
    assert [frame["event_id"] for frame in resumed] == ["6.1", "6.2", "6.3"]
