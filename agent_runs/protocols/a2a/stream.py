"""A task's stream as SSE: its first objects (the task as it stands), then its latest run's
journal through the translator (outbound.py), each stream response a JSON-RPC result in a
``data:`` frame (results.py). docs/protocols/a2a.md, The stream.

A subscription goes through approvals: while its task waits on them it waits for their
answer, which may come from another protocol or a person (docs/protocols/a2a.md,
Approvals), following the thread until the task's next run starts, then that run; when they
expire, it ends with the task failed."""

from collections.abc import AsyncGenerator
from typing import Any

from django.http import StreamingHttpResponse

from agent_runs.api.journal import Event, journal_stream
from agent_runs.api.sse import sse_response
from agent_runs.db import db_call
from agent_runs.events.reads import EventStreamStart, event_stream_start
from agent_runs.models import Run
from agent_runs.protocols.a2a.inbound import RpcCall
from agent_runs.protocols.a2a.outbound import TaskProjection, Wire
from agent_runs.protocols.a2a.results import stream_frame
from agent_runs.protocols.a2a.selectors import (
    TaskSnapshot,
    task_next_run,
    task_snapshot,
    task_wait_over,
)


def task_stream(*, user: Any, call: RpcCall, runs: list[Run]) -> StreamingHttpResponse:
    """A sent message's stream: the task as it stands, then its new run's journal from the
    run's first event."""
    run = runs[-1]
    snapshot = task_snapshot(runs=runs, last_run_events=False)
    start = event_stream_start(user=user, thread_id=run.thread_id, after_id=None, run_id=run.run_id)
    first = [{"task": snapshot.projection.task()}]
    return sse_response(
        task_events(call=call, run=run, projection=snapshot.projection, start=start, first=first)
    )


def subscription_stream(
    *, user: Any, call: RpcCall, runs: list[Run], snapshot: TaskSnapshot
) -> StreamingHttpResponse:
    """``SubscribeToTask``: the task as ``snapshot`` read it, then its latest run's journal
    after the snapshot (from the run's first event when it has not begun), through
    approvals."""
    run = runs[-1]
    start: EventStreamStart
    if snapshot.last_event_id:  # the run has begun: its journal goes on after the snapshot
        start = EventStreamStart(
            after_id=snapshot.last_event_id, run_id=run.run_id, run_ended=False
        )
    else:
        start = event_stream_start(
            user=user, thread_id=run.thread_id, after_id=None, run_id=run.run_id
        )
    first = [{"task": snapshot.projection.task()}]
    return sse_response(
        task_events(
            call=call,
            run=run,
            projection=snapshot.projection,
            start=start,
            first=first,
            through_approvals=True,
        )
    )


def task_events(
    *,
    call: RpcCall,
    run: Run,
    projection: TaskProjection,
    start: EventStreamStart,
    first: list[Wire],
    through_approvals: bool = False,
) -> AsyncGenerator[bytes, None]:
    """The SSE body of a task's stream: ``first`` (the task as it stands), then the run's
    journal after ``start`` through the translator, each stream response a JSON-RPC result
    in a ``data:`` frame; a keep-alive comment while the run is idle. It ends with the
    run's terminal (or input-required) status update; ``through_approvals`` (a
    subscription), a task waiting on approvals goes on with the run that starts once they
    are answered, to the end of that one."""

    def frame(response: Wire) -> bytes:
        return stream_frame(call.request_id, call.legacy, response)

    following = _Following(run=run, projection=projection, through_approvals=through_approvals)
    return journal_stream(
        thread_id=run.thread_id,
        start=start,
        translator=following,
        frame=frame,
        prepare=following.prepare,
        follow=through_approvals,
        head=b"".join(frame(obj) for obj in first),
    )


class _Following:
    """Which run of the task a stream translates (the edge kit's ``Translator`` over the
    task's projection): the run it began with, then (through approvals) the run of the task
    that starts once they are answered, and so on."""

    def __init__(self, *, run: Run, projection: TaskProjection, through_approvals: bool) -> None:
        self.run = run
        self.projection = projection
        self.through_approvals = through_approvals
        # The task's runs that a batch's RUN_STARTED events may start, read by ``prepare``.
        self._next_runs: dict[str, tuple[Run, Wire] | None] = {}

    @property
    def waiting(self) -> bool:
        """The task waits on approvals, and the stream waits with it."""
        return (
            self.through_approvals and self.projection.ended and bool(self.projection.approval_ids)
        )

    @property
    def ended(self) -> bool:
        return self.projection.ended and not self.waiting

    async def prepare(self, batch: list[Event]) -> list[Wire]:
        """What a batch needs read first: idle while waiting, whether the approvals expired
        (or were answered outside the task), which ends it; else the runs its RUN_STARTED
        events may start (the task's next, once its approvals are answered)."""
        if not batch:
            if self.waiting:
                return await db_call(task_wait_over, run=self.run, projection=self.projection)
            return []
        self._next_runs = {}
        if self.through_approvals:
            for event in batch:
                if event.type == "RUN_STARTED" and event.run_id not in (None, self.run.run_id):
                    self._next_runs[event.run_id] = await db_call(
                        task_next_run, run=self.run, run_id=event.run_id
                    )
        return []

    def translate(self, event: Event) -> list[Wire]:
        # An event without a runId (a CUSTOM one) is the run's whose events surround it.
        mine = event.run_id in (None, self.run.run_id)
        if not mine and not self._next_run(event):
            return []
        return self.projection.translate(event.payload)

    def _next_run(self, event: Event) -> bool:
        """Whether ``event`` starts the task's next run (then followed from here on)."""
        if not self.waiting or event.type != "RUN_STARTED":
            return False
        found = self._next_runs.get(event.run_id or "")
        if found is None:
            return False
        self.run, message = found
        self.projection.user_message(message)
        return True
