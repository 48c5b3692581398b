"""A response's stream as SSE: each object of the run's stream (outbound.py) framed with its
``sequence_number`` as the SSE ``id:``, so ``Last-Event-ID`` resumes.

The stream always replays the run from its ``RUN_STARTED`` (the objects are numbered by
their place in the whole run), skipping what the client has already seen, then follows the
run live until its terminal event; while the run is queued, keep-alive comments. A client
that goes away does not cancel the run: it resumes with ``GET …/{response_id}?stream=true``.
"""

import json
from collections.abc import AsyncIterator

from agent_runs.db import db_call
from agent_runs.events.codec import TERMINAL_TYPES
from agent_runs.events.follow import thread_events
from agent_runs.events.reads import EventStreamStart
from agent_runs.events.sse import KEEP_ALIVE_FRAME, retry_frame
from agent_runs.models import Run
from agent_runs.protocols.agent_api.outbound import Object, ResponseFacts, ResponseStream
from agent_runs.protocols.agent_api.selectors import response_facts_ended

_RETRY_MS = 3000


def object_frame(obj: Object) -> bytes:
    """One object as an SSE event: ``id:`` its sequence_number, ``data:`` its JSON."""
    data = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return f"id: {obj['sequence_number']}\ndata: {data}\n\n".encode()


def _frames(objects: list[Object], after: int | None) -> bytes:
    return b"".join(
        object_frame(obj) for obj in objects if after is None or obj["sequence_number"] > after
    )


async def response_stream(
    *, run: Run, facts: ResponseFacts, start: EventStreamStart, after: int | None
) -> AsyncIterator[bytes]:
    """The SSE body of the run's stream, after sequence ``after`` (``None``: from 0)."""
    stream = ResponseStream(facts)
    yield retry_frame(_RETRY_MS) + _frames(stream.created(), after)
    batches = thread_events(thread_id=run.thread_id, start=start, follow=False)
    try:
        async for batch in batches:
            objects: list[Object] = []
            for event in batch:
                if event.payload.get("type") in TERMINAL_TYPES:
                    # The run's end and usage are final once its terminal event is written.
                    stream.facts = await db_call(response_facts_ended, run_pk=run.pk)
                objects += stream.objects(event.payload)
            yield _frames(objects, after) or KEEP_ALIVE_FRAME
            del batch, objects
    finally:
        await batches.aclose()
