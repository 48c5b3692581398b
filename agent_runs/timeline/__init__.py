"""A run as a timeline for staff: its stages as bars on a time axis, the tool calls and model
calls inside them, the time to first token and the terminal event. Pure: the run's stored
events (docs/protocols/agui.md, "The events of a run") and its model calls' usage records
in, shapes to draw out; no ORM, no I/O.

Times are when things were stored: an event's is the time of the batch it was written in
(events written together share it), a model call's the time its usage was recorded, as the
call ended (it started ``latency_ms`` before). Positions on the axis are percentages of the
span from the first to the last thing the run did.
"""

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from agent_runs.timeline.shapes import (
    InterruptRecord,
    InterruptWait,
    JournalEvent,
    Marker,
    ModelCall,
    ModelCallRecord,
    Span,
    StageBar,
    Terminal,
    Timeline,
    ToolCall,
    duration_text,
    ms_of,
)

__all__ = ["TEXT_LIMIT", "InterruptRecord", "Timeline", "duration_text", "timeline_build"]

TERMINAL_TYPES = frozenset({"RUN_FINISHED", "RUN_ERROR"})
# Arguments and results longer than this are cut on the timeline; the raw events keep them.
TEXT_LIMIT = 2000
# Axis steps, in milliseconds: the smallest that gives at most MAX_TICKS intervals is used.
TICK_STEPS_MS = [
    *(base * scale for scale in (1, 10, 100, 1000) for base in (1, 2, 5)),
    *(10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000),
]
MAX_TICKS = 8
# With interrupts, the run's axis takes this share of the width; their waits, on a scale of
# their own (a wait of hours beside a run of seconds), start WAIT_GAP after it.
RUN_SHARE = Decimal(70)
WAIT_GAP = Decimal(2)


def timeline_build(
    *,
    events: Sequence[JournalEvent],
    model_calls: Sequence[ModelCallRecord],
    created_at: datetime,
    started_at: datetime | None,
    finished_at: datetime | None,
    now: datetime | None = None,
    interrupts: Sequence[InterruptRecord] = (),
    drawn_at: datetime | None = None,
) -> Timeline:
    """The run's timeline from its events in journal order and its model calls (any order),
    and the waits of the interrupts it stopped on.

    ``now``: the run is still going, so a stage that has not finished runs until now;
    without it such a stage ends at the terminal event or the last thing the run did.
    ``drawn_at``: when the page is drawn, the end of a wait still pending."""
    stages, tool_calls, calls = _bars(events, model_calls)
    first_token = _first_token(events)
    timeline = Timeline(
        stages=stages,
        tool_calls=tool_calls,
        model_calls=calls,
        terminal=_terminal(events),
        **_durations(first_token, created_at, started_at, finished_at, now),
        event_count=len(events),
        waits=[_wait(record, drawn_at) for record in interrupts],
    )
    _place_on_axis(timeline, events, (started_at, finished_at, now), first_token)
    return timeline


def _bars(
    events: Sequence[JournalEvent], model_calls: Sequence[ModelCallRecord]
) -> tuple[list[StageBar], list[ToolCall], list[ModelCall]]:
    """The stages, tool calls and model calls, each in the order they started."""
    stages, tool_calls = _stages_and_tools(events)
    calls = sorted((_model_call(record) for record in model_calls), key=lambda c: c.started_at)
    _assign_model_calls(stages, calls)
    return (
        sorted(stages, key=lambda stage: stage.started_at),
        sorted(tool_calls, key=lambda call: call.started_at),
        calls,
    )


def _durations(
    first_token: tuple[datetime, datetime] | None,
    created_at: datetime,
    started_at: datetime | None,
    finished_at: datetime | None,
    now: datetime | None,
) -> dict[str, Any]:
    """The run's time to first token, its wait in the queue and its duration (up to now, if
    it is still going)."""
    end_of_run = finished_at or now
    return {
        "ttft_ms": ms_of(first_token[1] - first_token[0]) if first_token else None,
        "queue_wait_ms": ms_of(started_at - created_at) if started_at else None,
        "duration_ms": ms_of(end_of_run - started_at) if started_at and end_of_run else None,
        "duration_so_far": started_at is not None and finished_at is None and now is not None,
    }


def _place_on_axis(
    timeline: Timeline,
    events: Sequence[JournalEvent],
    bounds: tuple[datetime | None, datetime | None, datetime | None],
    first_token: tuple[datetime, datetime] | None,
) -> None:
    """Everything placed on one axis, from the run's first moment to its last (``bounds``:
    when it started, finished, and now if it is still going); nothing to place, no axis."""
    started_at, finished_at, now = bounds
    calls = timeline.model_calls
    moments = [
        *(event.created_at for event in events),
        *(call.started_at for call in calls),
        *(call.ended_at for call in calls if call.ended_at),
    ]
    if not moments:
        return
    origin = min([*moments, *([started_at] if started_at else [])])
    end = max([*moments, *([finished_at] if finished_at else []), *([now] if now else [])])
    _place_all(
        timeline, origin=origin, end=end, first_token=first_token[1] if first_token else None
    )


def _stages_and_tools(events: Sequence[JournalEvent]) -> tuple[list[StageBar], list[ToolCall]]:
    """A bar per STEP_STARTED, closed by the next STEP_FINISHED of its name; a tool call per
    TOOL_CALL_START, completed by its ARGS, END and RESULT (matched by ``toolCallId``)."""
    stages: list[StageBar] = []
    open_stages: list[StageBar] = []
    tools: dict[str, ToolCall] = {}
    for event in events:
        payload = event.payload if isinstance(event.payload, dict) else {}
        if event.type == "STEP_STARTED":
            stage = StageBar(started_at=event.created_at, ended_at=None, name=_step_name(payload))
            stages.append(stage)
            open_stages.append(stage)
        elif event.type == "STEP_FINISHED":
            name = _step_name(payload)
            for stage in reversed(open_stages):
                if stage.name == name:
                    stage.ended_at = event.created_at
                    open_stages.remove(stage)
                    break
        elif event.type.startswith("TOOL_CALL_"):
            _tool_event(tools, event, payload, open_stages)
    for call in tools.values():
        _stage_named(stages, call.stage, call.started_at).tool_calls.append(call)
    return stages, list(tools.values())


def _tool_event(
    tools: dict[str, ToolCall],
    event: JournalEvent,
    payload: dict[str, Any],
    open_stages: list[StageBar],
) -> None:
    call_id = str(payload.get("toolCallId") or payload.get("tool_call_id") or "")
    call = tools.get(call_id)
    if call is None:
        stage = payload.get("stage") or (open_stages[-1].name if open_stages else "")
        call = ToolCall(
            started_at=event.created_at, ended_at=None, tool_call_id=call_id, stage=str(stage)
        )
        tools[call_id] = call
    call.name = str(payload.get("toolCallName") or payload.get("tool_name") or call.name)
    if event.type == "TOOL_CALL_ARGS" and not call.args:
        call.args = _json_text(payload["args"] if "args" in payload else payload.get("delta"))
    elif event.type == "TOOL_CALL_END" and call.ended_at is None:
        call.ended_at = event.created_at
    elif event.type == "TOOL_CALL_RESULT":
        call.ended_at = event.created_at
        if "tool_call_args" in payload:
            call.args = _json_text(payload["tool_call_args"])
        result = payload.get("result", payload.get("content"))
        call.result = None if result is None else _cut(str(result))
        call.status = str(payload.get("status") or "no status")
        call.error = None if payload.get("error") is None else _cut(str(payload["error"]))


def _stage_named(stages: list[StageBar], name: str, at: datetime) -> StageBar:
    """The bar of stage ``name`` running at ``at`` (else the last one started by then, else its
    first), or a new bar without step events when the journal has none of that name."""
    named = [stage for stage in stages if stage.name == name]
    for stage in reversed(named):
        if stage.started_at <= at and (stage.ended_at is None or at <= stage.ended_at):
            return stage
    for stage in reversed(named):
        if stage.started_at <= at:
            return stage
    if named:
        return named[0]
    stage = StageBar(started_at=at, ended_at=at, name=name, has_step_events=False)
    stages.append(stage)
    return stage


def _model_call(record: ModelCallRecord) -> ModelCall:
    latency = timedelta(milliseconds=record.latency_ms or 0)
    return ModelCall(
        started_at=record.created_at - latency,
        ended_at=record.created_at,
        stage=record.stage,
        model_id=record.model_id,
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        total_tokens=record.total_tokens,
        latency_ms=record.latency_ms,
        cost=record.cost,
        currency=record.currency,
        cost_source=record.cost_source,
    )


def _assign_model_calls(stages: list[StageBar], calls: list[ModelCall]) -> None:
    """Each call in its stage's bar, which spans it: an event's time is when its batch was
    written, which can be after the call it announced began."""
    for call in calls:
        stage = _stage_named(stages, call.stage, call.ended_at or call.started_at)
        stage.model_calls.append(call)
        stage.started_at = min(stage.started_at, call.started_at)
        if stage.ended_at is not None and call.ended_at is not None:
            stage.ended_at = max(stage.ended_at, call.ended_at)


def _terminal(events: Sequence[JournalEvent]) -> Terminal | None:
    for event in reversed(events):
        if event.type in TERMINAL_TYPES:
            payload = event.payload if isinstance(event.payload, dict) else {}
            return Terminal(
                type=event.type,
                code=payload.get("code"),
                message=payload.get("message"),
                at=event.created_at,
            )
    return None


def _first_token(events: Sequence[JournalEvent]) -> tuple[datetime, datetime] | None:
    """The times of RUN_STARTED and of the first TEXT_MESSAGE_CONTENT after it (the TTFT)."""
    started: datetime | None = None
    for event in events:
        if event.type == "RUN_STARTED" and started is None:
            started = event.created_at
        elif event.type == "TEXT_MESSAGE_CONTENT" and started is not None:
            return started, event.created_at
    return None


def _wait(record: InterruptRecord, drawn_at: datetime | None) -> InterruptWait:
    ended_at = record.closed_at or drawn_at
    return InterruptWait(
        started_at=record.created_at,
        ended_at=ended_at,
        record=record,
        so_far=record.closed_at is None and ended_at is not None,
    )


def _place_all(
    timeline: Timeline, *, origin: datetime, end: datetime, first_token: datetime | None
) -> None:
    span_ms = max(ms_of(end - origin), 1)
    share = RUN_SHARE if timeline.waits else Decimal(100)
    timeline.origin, timeline.span_ms = origin, span_ms
    run_end = timeline.terminal.at if timeline.terminal else end
    for stage in timeline.stages:
        stage.drawn_until = stage.ended_at or max(run_end, stage.started_at)
        _place(stage, origin, span_ms, stage.drawn_until, share)
    for call in [*timeline.tool_calls, *timeline.model_calls]:
        _place(call, origin, span_ms, call.ended_at or call.started_at, share)
    timeline.ticks = _ticks(span_ms, share)
    if first_token is not None:
        at = _percent(ms_of(first_token - origin), span_ms, share)
        timeline.ttft_marker = Marker(label=f"TTFT {timeline.ttft_text}", left=at)
    if timeline.terminal:
        at = _percent(ms_of(timeline.terminal.at - origin), span_ms, share)
        timeline.terminal_marker = Marker(label=timeline.terminal.type, left=at)
    if timeline.waits:
        _place_waits(timeline, origin)


def _place_waits(timeline: Timeline, origin: datetime) -> None:
    """Each wait from the start of the waits' band, as long as it waited on the band's own
    scale (the longest wait fills it), each row saying how long it waited."""
    start = RUN_SHARE + WAIT_GAP
    longest = max([wait.duration_ms or 0 for wait in timeline.waits] + [1])
    for wait in timeline.waits:
        wait.offset_ms = ms_of(wait.started_at - origin)
        wait.left = f"{start:.2f}"
        wait.width = _percent(wait.duration_ms or 0, longest, 100 - start)
    timeline.wait_marker = Marker(label="waits (own scale)", left=f"{start:.2f}")


def _place(
    span: Span, origin: datetime, span_ms: int, until: datetime, share: Decimal = Decimal(100)
) -> None:
    span.offset_ms = ms_of(span.started_at - origin)
    span.left = _percent(span.offset_ms, span_ms, share)
    span.width = _percent(max(ms_of(until - span.started_at), 0), span_ms, share)


def _ticks(span_ms: int, share: Decimal = Decimal(100)) -> list[Marker]:
    longest = -(-span_ms // MAX_TICKS)  # beyond the steps, MAX_TICKS intervals
    step = next((s for s in TICK_STEPS_MS if span_ms / s <= MAX_TICKS), longest)
    return [
        Marker(label=duration_text(at), left=_percent(at, span_ms, share))
        for at in range(0, span_ms + 1, step)
    ]


def _percent(part_ms: int, whole_ms: int, share: Decimal = Decimal(100)) -> str:
    """``part_ms`` of ``whole_ms`` as a percentage of ``share`` % of the width."""
    value = min(max(Decimal(part_ms) * share / Decimal(whole_ms), Decimal(0)), share)
    return f"{value:.2f}"


def _step_name(payload: dict[str, Any]) -> str:
    return str(payload.get("stepName") or payload.get("step_name") or "")


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return _cut(value)
    return _cut(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))


def _cut(text: str) -> str:
    if len(text) <= TEXT_LIMIT:
        return text
    return f"{text[:TEXT_LIMIT]}… ({len(text) - TEXT_LIMIT} more characters)"
