"""A response's events as SSE: its run's journal from its first event through the pure
translator (outbound/), each event an ``event:``/``data:`` frame, a keep-alive comment while
the run is idle. docs/protocols/openai-responses.md, Streaming."""

from collections.abc import AsyncGenerator
from typing import Any

from agent_runs.api.journal import Event, journal_stream
from agent_runs.api.sse import sse_frame
from agent_runs.db import db_call
from agent_runs.events.reads import EventStreamStart
from agent_runs.models import Run
from agent_runs.protocols.openai_responses.outbound import ResponseProjection, is_terminal
from agent_runs.protocols.openai_responses.selectors import run_usage


class _Events:
    """The edge kit's ``Translator`` over the response's projection: the run's events only,
    numbered after ``starting_after``, its terminal one with the run's usage (read by
    ``prepare``)."""

    ended = False  # the journal's stream ends with the run's terminal event

    def __init__(
        self, run: Run, projection: ResponseProjection, starting_after: int | None
    ) -> None:
        self._run = run
        self._projection = projection
        self._after = starting_after
        self._usage: Any = None

    def _mine(self, event: Event) -> bool:
        return bool(event.payload.get("runId", self._run.run_id) == self._run.run_id)

    async def prepare(self, batch: list[Event]) -> None:
        if any(is_terminal(event.payload) and self._mine(event) for event in batch):
            self._usage = await db_call(run_usage, self._run)

    def translate(self, event: Event) -> list[dict[str, Any]]:
        if not self._mine(event):
            return []
        usage = self._usage if is_terminal(event.payload) else None
        wires = self._projection.translate(event.payload, usage=usage)
        after = self._after
        return wires if after is None else [w for w in wires if w["sequence_number"] > after]


def _frame(wire: dict[str, Any]) -> bytes:
    return sse_frame(None, wire)


def response_events(
    *, run: Run, projection: ResponseProjection, start: EventStreamStart, starting_after: int | None
) -> AsyncGenerator[bytes, None]:
    """The SSE body of a response's events: its run's journal from its first event, through
    the translator (``projection``, fresh), each event an ``event:``/``data:`` frame; a
    keep-alive comment while the run is idle. ``starting_after``: only the events numbered
    after it are sent."""
    events = _Events(run, projection, starting_after)
    return journal_stream(
        thread_id=run.thread_id,
        start=start,
        translator=events,
        frame=_frame,
        prepare=events.prepare,
    )
