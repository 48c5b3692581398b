"""A task's stream as SSE: its first objects (the task as it stands), then its latest run's
journal through the translator (outbound.py), each stream response a JSON-RPC result in a
``data:`` frame (results.py). docs/protocols/a2a.md, The stream."""

from collections.abc import AsyncIterator

from agent_runs.events.follow import thread_events
from agent_runs.events.reads import EventStreamStart
from agent_runs.events.sse import KEEP_ALIVE_FRAME
from agent_runs.models import Run
from agent_runs.protocols.a2a.inbound import RpcCall
from agent_runs.protocols.a2a.outbound import TaskProjection, Wire
from agent_runs.protocols.a2a.results import stream_frame


async def task_events(
    *,
    call: RpcCall,
    run: Run,
    projection: TaskProjection,
    start: EventStreamStart,
    first: list[Wire],
) -> AsyncIterator[bytes]:
    """The SSE body of a task's stream: ``first`` (the task as it stands), then the run's
    journal after ``start`` through the translator, each stream response a JSON-RPC result
    in a ``data:`` frame; a keep-alive comment while the run is idle. It ends with the
    run's terminal (or input-required) status update."""
    yield b"".join(stream_frame(call.request_id, call.legacy, obj) for obj in first)
    batches = thread_events(thread_id=run.thread_id, start=start, follow=False)
    try:
        async for batch in batches:
            frames = [
                stream_frame(call.request_id, call.legacy, obj)
                for event in batch
                if event.payload.get("runId", run.run_id) == run.run_id
                for obj in projection.translate(event.payload)
            ]
            yield b"".join(frames) or KEEP_ALIVE_FRAME
            if projection.ended:
                break
    finally:
        await batches.aclose()
