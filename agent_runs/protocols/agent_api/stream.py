"""A response's stream as SSE: each object of the run's stream (outbound.py) framed with its
``sequence_number`` as the SSE ``id:``, so ``Last-Event-ID`` resumes.

The stream always replays the run from its ``RUN_STARTED`` (the objects are numbered by
their place in the whole run), skipping what the client has already seen, then follows the
run live until its terminal event; while the run is queued, keep-alive comments. A client
that goes away does not cancel the run: it resumes with ``GET …/{response_id}?stream=true``.
"""

from collections.abc import AsyncGenerator

from agent_runs.api.journal import Event, journal_stream
from agent_runs.api.sse import retry_frame, sse_frame
from agent_runs.db import db_call
from agent_runs.events.codec import TERMINAL_TYPES
from agent_runs.events.reads import EventStreamStart
from agent_runs.models import Run
from agent_runs.protocols.agent_api.outbound import Object, ResponseFacts, ResponseStream
from agent_runs.protocols.agent_api.selectors import response_facts_ended


def object_frame(obj: Object) -> bytes:
    """One object as an SSE event: ``id:`` its sequence_number, ``data:`` its JSON."""
    return sse_frame(obj["sequence_number"], obj, named=False)


class _Objects:
    """The edge kit's ``Translator`` over the run's ``ResponseStream``: the objects after
    sequence ``after`` (what the client has not seen), the run's final facts (its end and
    usage, read by ``prepare``) taken when its terminal event comes."""

    ended = False  # the journal's stream ends with the run's terminal event

    def __init__(self, stream: ResponseStream, *, run_pk: int, after: int | None) -> None:
        self.stream = stream
        self._run_pk = run_pk
        self._after = after
        self._facts_ended: ResponseFacts | None = None

    def unseen(self, objects: list[Object]) -> list[Object]:
        after = self._after
        return objects if after is None else [o for o in objects if o["sequence_number"] > after]

    async def prepare(self, batch: list[Event]) -> None:
        if any(event.type in TERMINAL_TYPES for event in batch):
            # The run's end and usage are final once its terminal event is written.
            self._facts_ended = await db_call(response_facts_ended, run_pk=self._run_pk)

    def translate(self, event: Event) -> list[Object]:
        if event.payload.get("type") in TERMINAL_TYPES and self._facts_ended is not None:
            self.stream.facts = self._facts_ended
        return self.unseen(self.stream.objects(event.payload))


def response_stream(
    *, run: Run, facts: ResponseFacts, start: EventStreamStart, after: int | None
) -> AsyncGenerator[bytes, None]:
    """The SSE body of the run's stream, after sequence ``after`` (``None``: from 0)."""
    objects = _Objects(ResponseStream(facts), run_pk=run.pk, after=after)
    head = retry_frame() + b"".join(
        object_frame(obj) for obj in objects.unseen(objects.stream.created())
    )
    return journal_stream(
        thread_id=run.thread_id,
        start=start,
        translator=objects,
        frame=object_frame,
        prepare=objects.prepare,
        head=head,
    )
