"""The pure timeline builder (agent_runs/timeline/) on crafted events and model calls."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from agent_runs.timeline import TEXT_LIMIT, InterruptRecord, duration_text, timeline_build

T0 = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)


def at(ms: int) -> datetime:
    return T0 + timedelta(milliseconds=ms)


@dataclass
class Event:
    type: str
    payload: dict[str, Any]
    created_at: datetime


@dataclass
class Call:
    stage: str
    created_at: datetime
    latency_ms: int | None
    model_id: str = "deepseek/deepseek-chat"
    input_tokens: int | None = 1200
    output_tokens: int | None = 300
    total_tokens: int | None = 1500
    cost: Decimal | None = Decimal("0.000203952")
    currency: str = "USD"
    cost_source: str = "catalog_fallback"


def event(ms: int, type_: str, **payload: Any) -> Event:
    return Event(type=type_, payload={"type": type_, **payload}, created_at=at(ms))


def journal() -> list[Event]:
    """A whole run: router 0-100 ms, worker 100-600 ms with a tool call, memory 600-700 ms."""
    return [
        event(0, "RUN_STARTED"),
        event(0, "STEP_STARTED", stepName="router"),
        event(100, "STEP_FINISHED", stepName="router"),
        event(100, "STEP_STARTED", stepName="worker"),
        event(
            200, "TOOL_CALL_START", toolCallId="c1", toolCallName="calendar_list", stage="worker"
        ),
        event(200, "TOOL_CALL_ARGS", toolCallId="c1", args={"day": "today"}, delta="{}"),
        event(210, "TOOL_CALL_END", toolCallId="c1"),
        event(250, "TOOL_CALL_RESULT", toolCallId="c1", status="success", result='{"count": 0}'),
        event(400, "TEXT_MESSAGE_START", messageId="m"),
        event(400, "TEXT_MESSAGE_CONTENT", messageId="m", delta="Hel"),
        event(450, "TEXT_MESSAGE_CONTENT", messageId="m", delta="lo"),
        event(500, "TEXT_MESSAGE_END", messageId="m"),
        event(600, "STEP_FINISHED", stepName="worker"),
        event(600, "STEP_STARTED", stepName="memory"),
        event(700, "STEP_FINISHED", stepName="memory"),
        event(800, "RUN_FINISHED"),
    ]


def build(events: list[Event], calls: list[Call] | None = None, **run: Any) -> Any:
    times = {"created_at": at(-1000), "started_at": at(0), "finished_at": at(800), **run}
    return timeline_build(events=events, model_calls=calls or [], **times)


def test_it_draws_each_stage_as_a_bar_with_its_duration_and_place_on_the_axis():
    timeline = build(journal())

    assert [(s.name, s.duration_ms, s.left, s.width) for s in timeline.stages] == [
        ("router", 100, "0.00", "12.50"),
        ("worker", 500, "12.50", "62.50"),
        ("memory", 100, "75.00", "12.50"),
    ]
    assert [s.duration_text for s in timeline.stages] == ["100 ms", "500 ms", "100 ms"]
    assert (timeline.queue_wait_text, timeline.duration_text) == ("1.00 s", "800 ms")
    assert [tick.label for tick in timeline.ticks] == [f"{ms} ms" for ms in range(0, 801, 100)]


def test_a_tool_call_is_matched_by_its_id_and_placed_in_its_stage():
    timeline = build(journal())

    [tool] = timeline.tool_calls
    assert (tool.name, tool.stage, tool.status, tool.duration_ms) == (
        "calendar_list",
        "worker",
        "success",
        50,
    )
    assert tool.args == '{\n  "day": "today"\n}'
    assert tool.result == '{"count": 0}' and tool.error is None
    assert timeline.stages[1].tool_calls == [tool]
    assert tool.offset_text == "+200 ms"


def test_the_time_to_first_token_runs_from_run_started_to_the_first_content():
    timeline = build(journal())

    assert timeline.ttft_ms == 400 and timeline.ttft_text == "400 ms"
    assert timeline.ttft_marker is not None and timeline.ttft_marker.left == "50.00"
    assert timeline.terminal is not None and timeline.terminal.type == "RUN_FINISHED"
    assert timeline.terminal_marker is not None and timeline.terminal_marker.left == "100.00"


def test_model_calls_in_any_order_come_out_by_start_each_in_the_stage_it_ran_in():
    calls = [
        Call(stage="worker", created_at=at(550), latency_ms=100),  # the worker's second turn
        Call(stage="router", created_at=at(90), latency_ms=80),
        Call(stage="worker", created_at=at(190), latency_ms=80, cost=None),
    ]
    timeline = build(journal(), calls)

    assert [(c.stage, c.offset_ms, c.duration_ms) for c in timeline.model_calls] == [
        ("router", 10, 80),
        ("worker", 110, 80),
        ("worker", 450, 100),
    ]
    router, worker, memory = timeline.stages
    assert len(router.model_calls) == 1 and len(worker.model_calls) == 2 and not memory.model_calls
    # Within its stage, calls and tools in the order they started.
    assert [(c.kind, c.offset_ms) for c in worker.calls] == [
        ("model", 110),
        ("tool", 200),
        ("model", 450),
    ]
    assert worker.model_calls[0].cost is None  # unknown, never a zero
    assert timeline.model_calls[0].cost == Decimal("0.000203952")


def test_a_stage_bar_spans_a_call_that_began_before_its_step_event_was_written():
    """STEP_STARTED is stored with its batch, which can be written while the call runs."""
    calls = [Call(stage="router", created_at=at(120), latency_ms=130)]  # from -10 to 120 ms
    timeline = build(journal(), calls, started_at=at(-20))

    router = timeline.stages[0]
    assert (router.started_at, router.ended_at) == (at(-10), at(120))
    assert router.duration_text == "130 ms" and router.offset_text == "+10 ms"
    assert timeline.stages[1].started_at == at(100)  # the worker's own step time


def test_events_that_share_a_stored_time_keep_their_journal_order():
    """Events written in one batch share their time: the journal's order decides."""
    events = [
        event(0, "RUN_STARTED"),
        event(0, "STEP_STARTED", stepName="router"),
        event(0, "STEP_FINISHED", stepName="router"),
        event(0, "STEP_STARTED", stepName="worker"),
        event(0, "TEXT_MESSAGE_START", messageId="m"),
        event(0, "TEXT_MESSAGE_CONTENT", messageId="m", delta="Hi"),
        event(0, "TEXT_MESSAGE_END", messageId="m"),
        event(0, "STEP_FINISHED", stepName="worker"),
        event(0, "RUN_FINISHED"),
    ]
    timeline = build(events, finished_at=at(0))

    assert [(s.name, s.duration_ms, s.ended_at is not None) for s in timeline.stages] == [
        ("router", 0, True),
        ("worker", 0, True),
    ]
    assert timeline.ttft_ms == 0 and timeline.span_ms == 1


def test_a_stage_that_never_finished_is_unfinished_and_runs_to_the_terminal_event():
    events = [
        *journal()[:4],
        event(300, "RUN_ERROR", code="model_error", message="runtime execution failed"),
    ]
    timeline = build(events, finished_at=at(300))

    worker = timeline.stages[1]
    assert worker.ended_at is None and worker.duration_text == "unfinished"
    assert worker.drawn_until == at(300) and worker.width == "66.67"
    assert timeline.terminal is not None
    assert (timeline.terminal.type, timeline.terminal.code) == ("RUN_ERROR", "model_error")
    assert timeline.ttft_ms is None and timeline.ttft_text == "-" and timeline.ttft_marker is None


def test_a_journal_without_its_terminal_event_is_drawn_until_now_while_the_run_runs():
    events = journal()[:4]  # the worker started; nothing after
    timeline = build(events, finished_at=None, now=at(1000))

    assert timeline.terminal is None and timeline.terminal_marker is None
    worker = timeline.stages[1]
    assert worker.duration_text == "unfinished" and worker.drawn_until == at(1000)
    assert (worker.left, worker.width) == ("10.00", "90.00")
    assert timeline.duration_text == "1.00 s so far"

    # The same journal of a run that is not running (say, paused) stops at its last event.
    parked = build(events, finished_at=None, now=None)
    assert parked.stages[1].drawn_until == at(100) and parked.duration_text == "-"


def test_a_tool_call_without_a_result_and_one_that_failed():
    events = [
        event(0, "RUN_STARTED"),
        event(0, "STEP_STARTED", stepName="worker"),
        event(10, "TOOL_CALL_START", toolCallId="a", toolCallName="calendar_create"),
        event(
            20, "TOOL_CALL_START", toolCallId="b", toolCallName="calendar_delete", stage="worker"
        ),
        event(30, "TOOL_CALL_ARGS", toolCallId="b", delta='{"event_id": 999}'),
        event(
            40,
            "TOOL_CALL_RESULT",
            toolCallId="b",
            status="failure",
            result=None,
            error="no event 999",
        ),
        event(50, "TOOL_CALL_ARGS", toolCallId="a", delta="not json"),
    ]
    timeline = build(events, finished_at=None)

    a, b = timeline.tool_calls
    assert (a.name, a.stage, a.status, a.duration_text, a.args) == (
        "calendar_create",
        "worker",  # from the stage open when it started
        "no result",
        "unfinished",
        "not json",
    )
    assert (b.status, b.error, b.result, b.args) == (
        "failure",
        "no event 999",
        None,
        '{\n  "event_id": 999\n}',
    )


def test_a_model_call_of_a_stage_without_step_events_gets_a_bar_of_its_own():
    calls = [Call(stage="router", created_at=at(150), latency_ms=100)]
    timeline = build([], calls, started_at=at(0), finished_at=None)

    [router] = timeline.stages
    assert not router.has_step_events
    assert (router.started_at, router.ended_at) == (at(50), at(150))
    assert router.model_calls == timeline.model_calls


def test_a_run_with_no_events_and_no_calls_has_an_empty_timeline():
    timeline = build([], started_at=None, finished_at=None)

    assert timeline.empty and timeline.stages == [] and timeline.event_count == 0
    assert (timeline.queue_wait_text, timeline.duration_text, timeline.ttft_text) == ("-", "-", "-")


def test_long_arguments_and_results_are_cut_and_say_how_much():
    long = "x" * (TEXT_LIMIT + 10)
    events = [
        event(0, "RUN_STARTED"),
        event(0, "TOOL_CALL_START", toolCallId="a", toolCallName="t", stage="worker"),
        event(1, "TOOL_CALL_RESULT", toolCallId="a", status="success", result=long),
    ]
    [tool] = build(events).tool_calls
    assert tool.result == "x" * TEXT_LIMIT + "… (10 more characters)"


def test_durations_read_in_milliseconds_seconds_or_minutes():
    assert [duration_text(ms) for ms in (0, 999, 1000, 1250, 59_999, 125_000, 10_920_000)] == [
        "0 ms",
        "999 ms",
        "1.00 s",
        "1.25 s",
        "59.99 s",
        "2 min 05 s",
        "3 h 02 min",
    ]


def test_a_long_axis_still_has_a_handful_of_ticks():
    """A run stuck running for days: the axis up to now, in at most eight intervals."""
    events = journal()[:4]
    timeline = build(events, finished_at=None, now=at(3 * 24 * 3_600_000))

    assert 2 <= len(timeline.ticks) <= 9
    assert timeline.ticks[0].label == "0 ms" and timeline.duration_text == "72 h 00 min so far"


def wait_of(ms: int, closed_ms: int | None, status: str, **extra: Any) -> InterruptRecord:
    return InterruptRecord(
        interrupt_id=f"int-{ms}-{status}",
        tool_name="calendar_create",
        kind="approval",
        status=status,
        created_at=at(ms),
        closed_at=None if closed_ms is None else at(closed_ms),
        answer="",
        **extra,
    )


def test_interrupts_wait_after_the_last_stage_on_a_scale_of_their_own():
    answered = wait_of(780, 780 + 3_600_000, "resolved", answered_by_pk=7)
    pending = wait_of(780, None, "pending")
    timeline = build(journal(), interrupts=[answered, pending], drawn_at=at(780 + 7_200_000))

    # The run keeps its own axis, in the first 70 % of the width...
    assert [(s.name, s.left, s.width) for s in timeline.stages] == [
        ("router", "0.00", "8.75"),
        ("worker", "8.75", "43.75"),
        ("memory", "52.50", "8.75"),
    ]
    assert timeline.ticks[-1].left == "70.00" and timeline.terminal_marker is not None
    assert timeline.terminal_marker.left == "70.00"
    # ...and the waits follow it: the longest (still pending, up to now) fills the rest.
    first, second = timeline.waits
    assert (first.left, first.width, first.waited_text) == ("72.00", "14.00", "1 h 00 min")
    assert (second.left, second.width, second.waited_text) == (
        "72.00",
        "28.00",
        "2 h 00 min so far",
    )
    assert first.record is answered and first.offset_text == "+780 ms"
    assert timeline.wait_marker is not None and timeline.wait_marker.left == "72.00"
    assert timeline.wait_marker.label == "waits (own scale)"


def test_a_run_without_interrupts_keeps_the_whole_width():
    timeline = build(journal(), drawn_at=at(5000))

    assert timeline.waits == [] and timeline.wait_marker is None
    assert timeline.ticks[-1].left == "100.00"
