"""The Agent Protocol's WebSocket frames (``/ws``): a task's journal as the spec's task, step,
artifact and log events. docs/spec/agent-protocol-tasks.md, WebSocket Events;
docs/protocols/agent-protocol-ws.md.

Pure and deterministic: the frames of a journal event are a function of the event (its id,
the time it was written and its wire JSON), the files of the step it ends, the task id and
what ``FrameState`` keeps of the task's earlier events (the open stage of the run, whether
the journal had begun), so a replay sends what the live stream sent. Each frame is ``{type,
task_id, step_id?, artifact_id?, data, timestamp, event_id}``:

- ``timestamp``: when its journal event was written (ISO 8601 UTC, milliseconds), the same
  live and replayed (the time of sending would not be).
- ``event_id`` (an extension): the frame's own cursor, ``<event id>.<n>`` for the ``n``-th
  frame of its journal event (one event gives several: ``task.created`` and
  ``task.started``, ``step.failed`` and ``task.failed``, ...). A client gives it back as
  ``lastEventId`` to resume after that frame; a bare event id resumes after the whole event.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from agent_runs.events.codec import RUN_INTERRUPTED_EVENT, RUN_PAUSED_EVENT, RUN_RESUMED_EVENT
from agent_runs.models import agent_step_id
from agent_runs.protocols.agent_protocol.outbound import APPROVAL_STEP, approval_step_id
from agent_runs.services.lifecycle import RUN_CANCELLED_CODE

Frame = dict[str, Any]

# How much of a tool's arguments or result a log line shows.
_LOG_TEXT_CHARS = 500


class FrameState:
    """What the projection keeps of a task's events before the current one. A task's journal
    is a concatenation of whole runs, so that is the run it is in and that run's open stage.
    A stream starts it at a run's first event (a resume replays the run up to its cursor
    without sending it), saying whether the task's journal had begun before that."""

    def __init__(self, *, journal_begun: bool = False) -> None:
        self.journal_begun = journal_begun  # the task's first event (its task.created) is behind
        self.run_id: str | None = None  # the run of the last event (CUSTOM events name none)
        self.open_stage: str | None = None
        self.interrupted = False  # the run stopped on interrupts: its end is no completion


@dataclass(frozen=True)
class HeldRun:
    """The run whose held reply a run goes on with (looked up when its ``RUN_STARTED`` is
    sent, as a step's files are): its id, and its approvals, each ``{id, status,
    approved}``, closed by then (so the same live and replayed)."""

    run_id: str
    approvals: tuple[Mapping[str, Any], ...] = ()


class FrameCursor(NamedTuple):
    """Where a resumed stream goes on: after frame ``frame`` of journal event ``event_id``
    (``None``: after all of that event's frames)."""

    event_id: int
    frame: int | None = None

    def __str__(self) -> str:
        return str(self.event_id) if self.frame is None else f"{self.event_id}.{self.frame}"

    def sends(self, event_id: int, number: int) -> bool:
        """Whether the ``number``-th frame (from 1) of journal event ``event_id`` comes
        after this cursor."""
        if event_id != self.event_id:
            return event_id > self.event_id
        return self.frame is not None and number > self.frame


# A frame's position in its event: no event gives near this many frames.
_MAX_FRAME = 10**6
_MAX_EVENT_ID = 2**63  # event ids are PostgreSQL bigints


def frame_cursor(value: Any) -> FrameCursor:
    """A ``lastEventId``: a frame's ``event_id`` (``"67.2"``) or an event id (``67``, as a
    number or a string of digits); anything else is a ``ValueError``."""
    if type(value) is int:
        event_id, frame = value, None
    elif isinstance(value, str) and value.isascii():
        head, dot, tail = value.partition(".")
        if not head.isdigit() or (dot and not tail.isdigit()):
            raise ValueError(value)
        event_id, frame = int(head), int(tail) if dot else None
    else:
        raise ValueError(value)
    if not 0 <= event_id < _MAX_EVENT_ID or (frame is not None and frame > _MAX_FRAME):
        raise ValueError(value)
    return FrameCursor(event_id, frame)


@dataclass(frozen=True)
class _Event:
    task_id: str
    event_id: int
    payload: Mapping[str, Any]
    state: FrameState
    held: HeldRun | None = None

    @property
    def run_id(self) -> str:
        return str(self.payload.get("runId") or self.state.run_id or "")

    def step_id(self, stage: str | None) -> str | None:
        if not stage:
            return None
        return str(agent_step_id(thread_id=self.task_id, run_id=self.run_id, stage=stage))

    def frame(self, kind: str, data: Any, *, stage: str | None = None) -> Frame:
        return _frame(kind, task_id=self.task_id, data=data, step_id=self.step_id(stage))

    def task_frame(self, kind: str, **data: Any) -> Frame:
        return self.frame(kind, {"cycle_id": self.run_id, **data})


def event_frames(
    *,
    task_id: str,
    event_id: int,
    at: datetime,
    payload: Mapping[str, Any],
    state: FrameState,
    artifacts: Iterable[Mapping[str, Any]] = (),
    held: HeldRun | None = None,
) -> list[Frame]:
    """The frames of one journal event of the task (often none), in the order sent: first
    ``artifact.created`` for each file of the step it ends (``finished_step_id``), then
    what the event itself says; each with the event's time and its own cursor. ``held``:
    for a ``RUN_STARTED``, the run whose held reply it goes on with."""
    event = _Event(task_id, event_id, payload, state, held)
    step_id = finished_step_id(task_id=task_id, payload=payload)
    frames = [_artifact_frame(task_id, step_id, artifact) for artifact in artifacts if step_id]
    handler = _HANDLERS.get(str(payload.get("type")))
    frames += handler(event) if handler else []
    state.journal_begun = True
    state.run_id = event.run_id or None
    timestamp = at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    for number, frame in enumerate(frames, start=1):
        frame["timestamp"] = timestamp
        frame["event_id"] = str(FrameCursor(event_id, number))
    return frames


def finished_step_id(*, task_id: str, payload: Mapping[str, Any]) -> str | None:
    """The step a ``STEP_FINISHED`` ends, whose files the stream announces with it; ``None``
    for any other event."""
    if payload.get("type") != "STEP_FINISHED" or not payload.get("stepName"):
        return None
    run_id = str(payload.get("runId", ""))
    return str(agent_step_id(thread_id=task_id, run_id=run_id, stage=payload["stepName"]))


def _artifact_frame(task_id: str, step_id: str, artifact: Mapping[str, Any]) -> Frame:
    """``artifact.created`` for a file a step made, sent with the event that ends it."""
    data = {
        "file_name": artifact["file_name"],
        "relative_path": artifact["relative_path"],
        "mime_type": artifact["mime_type"],
        "size_bytes": artifact["size_bytes"],
    }
    artifact_id = str(artifact["id"])
    return _frame(
        "artifact.created", task_id=task_id, data=data, step_id=step_id, artifact_id=artifact_id
    )


def _frame(
    kind: str,
    *,
    task_id: str,
    data: Any,
    step_id: str | None = None,
    artifact_id: str | None = None,
) -> Frame:
    frame: Frame = {"type": kind, "task_id": task_id}
    if step_id is not None:
        frame["step_id"] = step_id
    if artifact_id is not None:
        frame["artifact_id"] = artifact_id
    frame["data"] = data
    return frame


def _step_started(event: _Event) -> list[Frame]:
    stage = str(event.payload.get("stepName", ""))
    event.state.open_stage = stage
    return [
        event.frame("step.created", {"name": stage}, stage=stage),
        event.frame("step.started", {"name": stage}, stage=stage),
    ]


def _step_finished(event: _Event) -> list[Frame]:
    stage = str(event.payload.get("stepName", ""))
    event.state.open_stage = None
    return [event.frame("step.completed", {"name": stage}, stage=stage)]


def _text_content(event: _Event) -> list[Frame]:
    stage = event.state.open_stage
    return [event.frame("step.running", {"delta": event.payload.get("delta", "")}, stage=stage)]


def _tool_log(describe: Callable[[str, Mapping[str, Any]], str]) -> Callable[[_Event], list[Frame]]:
    """A ``log`` line about a tool call, of the step it was made in."""

    def handler(event: _Event) -> list[Frame]:
        payload = event.payload
        name = payload.get("toolCallName") or payload.get("tool_name") or "?"
        stage = payload.get("stage") or event.state.open_stage
        return [event.frame("log", describe(str(name), payload), stage=stage)]

    return handler


def _tool_result(name: str, payload: Mapping[str, Any]) -> str:
    if payload.get("status", "success") == "success":
        return f"tool {name} succeeded: {_clip(payload.get('content'))}"
    return f"tool {name} failed: {_clip(payload.get('error') or payload.get('content'))}"


def _clip(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= _LOG_TEXT_CHARS else text[: _LOG_TEXT_CHARS - 1] + "…"


def _run_started(event: _Event) -> list[Frame]:
    event.state.open_stage = None
    event.state.interrupted = False
    # The task was created with its first run: its first event says both.
    created = [] if event.state.journal_begun else [event.task_frame("task.created")]
    return [*created, *_went_on(event), event.task_frame("task.started")]


def _went_on(event: _Event) -> list[Frame]:
    """A run that goes on with a reply held on approvals: the approval steps ended
    (``step.completed``, answered or cancelled; ``step.failed``, expired), then
    ``task.resumed``."""
    held = event.held
    if held is None:
        return []
    frames = []
    for approval in held.approvals:
        expired = approval.get("status") == "expired"
        step_id = approval_step_id(
            thread_id=event.task_id, run_id=held.run_id, interrupt_id=str(approval["id"])
        )
        data = {
            "name": APPROVAL_STEP,
            "interrupt_id": approval["id"],
            "interrupt_status": approval.get("status"),
            "approved": approval.get("approved"),
        }
        kind = "step.failed" if expired else "step.completed"
        frames.append(_frame(kind, task_id=event.task_id, data=data, step_id=str(step_id)))
    frames.append(event.task_frame("task.resumed", continues=held.run_id, next_stage="worker"))
    return frames


def _run_finished(event: _Event) -> list[Frame]:
    event.state.open_stage = None
    if event.state.interrupted:  # it waits on answers: task.paused said so
        return []
    return [event.task_frame("task.completed")]


def _run_error(event: _Event) -> list[Frame]:
    """The run ended early: the step it was in failed, then the task failed, or was
    cancelled (``RUN_ERROR`` ``code: "cancelled"``)."""
    code = event.payload.get("code")
    message = event.payload.get("message")
    stage, event.state.open_stage = event.state.open_stage, None
    frames = []
    if stage is not None:
        failure = {"name": stage, "code": code, "message": message}
        frames.append(event.frame("step.failed", failure, stage=stage))
    if code == RUN_CANCELLED_CODE:
        frames.append(event.task_frame("task.cancelled"))
    else:
        frames.append(event.task_frame("task.failed", code=code, message=message))
    return frames


def _custom(event: _Event) -> list[Frame]:
    """A run parked at a stage boundary (a pause, or a spent step budget) and resumed, or
    stopped on approvals (or a client's tool calls) that wait for answers."""
    name = event.payload.get("name")
    value = event.payload.get("value")
    value = value if isinstance(value, Mapping) else {}
    if name == RUN_INTERRUPTED_EVENT:
        return _interrupted(event, value)
    if name == RUN_PAUSED_EVENT:
        reason = value.get("reason")
        return [event.task_frame("task.paused", reason=reason, next_stage=value.get("next_stage"))]
    if name == RUN_RESUMED_EVENT:
        return [event.task_frame("task.resumed", next_stage=value.get("next_stage"))]
    return []


def _interrupted(event: _Event, value: Mapping[str, Any]) -> list[Frame]:
    """``step.created`` for each approval (the ``approval`` step, its interrupt as AG-UI
    1.0 gives it), then ``task.paused`` (reason ``approval``, or ``tool_call`` when it waits
    on a client's tool calls only)."""
    event.state.interrupted = True
    interrupts = [item for item in value.get("interrupts") or [] if isinstance(item, Mapping)]
    frames = []
    for interrupt in interrupts:
        step_id = approval_step_id(
            thread_id=event.task_id, run_id=event.run_id, interrupt_id=str(interrupt.get("id"))
        )
        data = {"name": APPROVAL_STEP, "interrupt": dict(interrupt)}
        frames.append(
            _frame("step.created", task_id=event.task_id, data=data, step_id=str(step_id))
        )
    pending_calls = list(value.get("pendingToolCallIds") or [])
    paused = event.task_frame(
        "task.paused",
        reason="approval" if interrupts else "tool_call",
        interrupt_ids=[interrupt.get("id") for interrupt in interrupts],
        pending_tool_call_ids=pending_calls,
    )
    return [*frames, paused]


_HANDLERS: dict[str, Callable[[_Event], list[Frame]]] = {
    "RUN_STARTED": _run_started,
    "STEP_STARTED": _step_started,
    "STEP_FINISHED": _step_finished,
    "TEXT_MESSAGE_CONTENT": _text_content,
    "TOOL_CALL_START": _tool_log(lambda name, payload: f"tool {name} called"),
    "TOOL_CALL_ARGS": _tool_log(
        lambda name, payload: f"tool {name} arguments: {_clip(payload.get('delta'))}"
    ),
    "TOOL_CALL_RESULT": _tool_log(_tool_result),
    "RUN_FINISHED": _run_finished,
    "RUN_ERROR": _run_error,
    "CUSTOM": _custom,
}
