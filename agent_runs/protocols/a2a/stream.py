"""A task's stream as SSE: its first objects (the task as it stands), then its latest run's
journal through the translator (outbound.py), each stream response a JSON-RPC result in a
``data:`` frame (results.py). docs/protocols/a2a.md, The stream.

A subscription goes through approvals: while its task waits on them it waits for their
answer, which may come from another protocol or a person (docs/protocols/a2a.md,
Approvals), following the thread until the task's next run starts, then that run; when they
expire, it ends with the task failed."""

from collections.abc import AsyncIterator

from agent_runs.db import db_call
from agent_runs.events.follow import Event, thread_events
from agent_runs.events.reads import EventStreamStart
from agent_runs.events.sse import KEEP_ALIVE_FRAME
from agent_runs.models import Run
from agent_runs.protocols.a2a.inbound import RpcCall
from agent_runs.protocols.a2a.outbound import TaskProjection, Wire
from agent_runs.protocols.a2a.results import stream_frame
from agent_runs.protocols.a2a.selectors import task_next_run, task_wait_over


async def task_events(
    *,
    call: RpcCall,
    run: Run,
    projection: TaskProjection,
    start: EventStreamStart,
    first: list[Wire],
    through_approvals: bool = False,
) -> AsyncIterator[bytes]:
    """The SSE body of a task's stream: ``first`` (the task as it stands), then the run's
    journal after ``start`` through the translator, each stream response a JSON-RPC result
    in a ``data:`` frame; a keep-alive comment while the run is idle. It ends with the
    run's terminal (or input-required) status update; ``through_approvals`` (a
    subscription), a task waiting on approvals goes on with the run that starts once they
    are answered, to the end of that one."""
    yield b"".join(stream_frame(call.request_id, call.legacy, obj) for obj in first)
    following = _Following(run=run, projection=projection, through_approvals=through_approvals)
    batches = thread_events(thread_id=run.thread_id, start=start, follow=through_approvals)
    try:
        async for batch in batches:
            frames = [
                stream_frame(call.request_id, call.legacy, obj)
                for obj in await following.translate(batch)
            ]
            yield b"".join(frames) or KEEP_ALIVE_FRAME
            if following.over:
                break
    finally:
        await batches.aclose()


class _Following:
    """Which run of the task a stream translates: the run it began with, then (through
    approvals) the run of the task that starts once they are answered, and so on."""

    def __init__(self, *, run: Run, projection: TaskProjection, through_approvals: bool) -> None:
        self.run = run
        self.projection = projection
        self.through_approvals = through_approvals

    @property
    def waiting(self) -> bool:
        """The task waits on approvals, and the stream waits with it."""
        return (
            self.through_approvals and self.projection.ended and bool(self.projection.approval_ids)
        )

    @property
    def over(self) -> bool:
        return self.projection.ended and not self.waiting

    async def translate(self, batch: list[Event]) -> list[Wire]:
        if not batch and self.waiting:
            # Idle while waiting: approvals that expired (or were answered outside the
            # task) end it.
            return await db_call(task_wait_over, run=self.run, projection=self.projection)
        responses: list[Wire] = []
        for event in batch:
            # An event without a runId (a CUSTOM one) is the run's whose events surround it.
            mine = event.run_id in (None, self.run.run_id)
            if not mine and not await self._next_run(event):
                continue
            responses += self.projection.translate(event.payload)
        return responses

    async def _next_run(self, event: Event) -> bool:
        """Whether ``event`` starts the task's next run (then followed from here on)."""
        if not self.waiting or event.type != "RUN_STARTED":
            return False
        found = await db_call(task_next_run, run=self.run, run_id=event.run_id)
        if found is None:
            return False
        self.run, message = found
        self.projection.user_message(message)
        return True
