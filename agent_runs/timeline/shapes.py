"""The shapes of a run's timeline (agent_runs/timeline): what the builder reads (a stored
event, a model call's usage record) and what it gives the run page to draw."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol


class JournalEvent(Protocol):
    """A stored event, as ``agent_runs.models.RunEvent`` has it."""

    type: str
    payload: Any
    created_at: datetime


class ModelCallRecord(Protocol):
    """A model call's usage record, as ``billing.models.UsageRecord`` has it."""

    stage: str
    model_id: str
    created_at: datetime
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    latency_ms: int | None
    cost: Decimal | None
    currency: str
    cost_source: str


@dataclass
class Span:
    """Something with a start and, once it ended, an end; placed on the axis by ``_place``."""

    started_at: datetime
    ended_at: datetime | None
    left: str = "0"  # CSS percentages of the axis
    width: str = "0"
    offset_ms: int = 0  # from the axis' origin

    @property
    def duration_ms(self) -> int | None:
        if self.ended_at is None:
            return None
        return ms_of(self.ended_at - self.started_at)

    @property
    def duration_text(self) -> str:
        duration = self.duration_ms
        return "unfinished" if duration is None else duration_text(duration)

    @property
    def offset_text(self) -> str:
        """When it started, from the axis' origin: ``+184 ms``."""
        return f"+{duration_text(self.offset_ms)}"


@dataclass
class ToolCall(Span):
    tool_call_id: str = ""
    name: str = ""
    stage: str = ""
    args: str = ""  # JSON, indented, cut at TEXT_LIMIT
    result: str | None = None
    status: str = "no result"  # the result's status: success, failure, partial
    error: str | None = None
    kind: str = "tool"


@dataclass
class ModelCall(Span):
    stage: str = ""
    model_id: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    latency_ms: int | None = None
    cost: Decimal | None = None
    currency: str = ""
    cost_source: str = ""
    kind: str = "model"


@dataclass
class StageBar(Span):
    """One stage between its STEP_STARTED and STEP_FINISHED; ``ended_at`` is None when it
    never finished (then its bar runs to the run's end or to now)."""

    name: str = ""
    drawn_until: datetime | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    model_calls: list[ModelCall] = field(default_factory=list)
    has_step_events: bool = True  # False: drawn from its model calls alone

    @property
    def calls(self) -> list[ToolCall | ModelCall]:
        """Its model calls and tool calls, in the order they started."""
        calls: list[ToolCall | ModelCall] = [*self.model_calls, *self.tool_calls]
        return sorted(calls, key=lambda call: call.started_at)


@dataclass(frozen=True)
class InterruptRecord:
    """An interrupt the run stopped on (``agent_runs.models.Interrupt``), with the run that
    went on from it, if one did."""

    interrupt_id: str
    tool_name: str
    kind: str
    status: str
    created_at: datetime
    closed_at: datetime | None
    answer: str  # the answer as JSON, "" before there is one
    answered_by_pk: int | None = None
    answered_by_run_id: str = ""


@dataclass
class InterruptWait(Span):
    """How long an interrupt waited for its answer: from when it was made (the run's end)
    to its answer, expiry or cancel (``closed_at``), or to now while it is pending. Drawn
    after the run's last stage, on a scale of its own (the longest wait)."""

    record: InterruptRecord | None = None
    so_far: bool = False  # still pending: the wait runs to now

    @property
    def waited_text(self) -> str:
        return f"{self.duration_text} so far" if self.so_far else self.duration_text


@dataclass(frozen=True)
class Marker:
    label: str
    left: str


@dataclass(frozen=True)
class Terminal:
    type: str  # RUN_FINISHED or RUN_ERROR
    code: str | None
    message: str | None
    at: datetime


@dataclass
class Timeline:
    stages: list[StageBar]
    tool_calls: list[ToolCall]
    model_calls: list[ModelCall]
    terminal: Terminal | None
    ttft_ms: int | None
    queue_wait_ms: int | None
    duration_ms: int | None
    duration_so_far: bool  # the run has not ended: ``duration_ms`` is up to now
    event_count: int
    origin: datetime | None = None
    span_ms: int = 0
    ticks: list[Marker] = field(default_factory=list)
    ttft_marker: Marker | None = None
    terminal_marker: Marker | None = None
    # The interrupts the run stopped on and how long each waited, after its last stage; with
    # any, the run's own axis takes the first RUN_SHARE % of the width and the waits the rest.
    waits: list[InterruptWait] = field(default_factory=list)
    wait_marker: Marker | None = None

    @property
    def empty(self) -> bool:
        return self.origin is None

    @property
    def ttft_text(self) -> str:
        return _text_or_dash(self.ttft_ms)

    @property
    def queue_wait_text(self) -> str:
        return _text_or_dash(self.queue_wait_ms)

    @property
    def duration_text(self) -> str:
        text = _text_or_dash(self.duration_ms)
        return f"{text} so far" if self.duration_so_far else text


def duration_text(ms: int) -> str:
    """``850 ms``, ``1.25 s``, ``2 min 05 s``, ``3 h 02 min``."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms // 1000}.{ms % 1000 // 10:02d} s"  # cut, never rounded up to 60.00
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _text_or_dash(ms: int | None) -> str:
    return "-" if ms is None else duration_text(ms)


def ms_of(delta: timedelta) -> int:
    """Whole milliseconds, never below 0 (event times are the database's clock, usage times
    the worker's, which can disagree a little)."""
    return max(int(delta / timedelta(milliseconds=1)), 0)
