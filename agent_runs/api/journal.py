"""The one loop every protocol's stream runs: follow a thread's journal (replay, then live,
``agent_runs/events/follow.py``), translate each event into the protocol's wire objects,
frame them, and keep the connection alive while the journal is idle.

A protocol brings its outbound translator (``Translator``: journal event in, wire objects
out, and whether its run has ended), pure, and, when a batch needs reads first (a run's
usage before its terminal event, say), a ``prepare`` coroutine that does them. Resuming is
the caller's ``start`` (``events/reads.py``: where the journal is followed from) plus what
its translator skips. Without a translator the journal's events are sent as stored, framed
from their stored JSON (nothing decoded or encoded again: the fast path of AG-UI's ``/runs``
streams).
"""

import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Protocol, TypeVar, cast, overload

from agent_runs.api.sse import KEEP_ALIVE_FRAME, sse_frames_stored
from agent_runs.events.follow import Event, thread_events
from agent_runs.events.reads import EventStreamStart

__all__ = ["Event", "Prepare", "Translator", "journal_batches", "journal_stream"]

W = TypeVar("W")
W_co = TypeVar("W_co", covariant=True)

# Reads a batch needs before it is translated; any wire objects it gives are sent first.
Prepare = Callable[[list[Event]], Awaitable[Sequence[W] | None]]


class Translator(Protocol[W_co]):
    """A protocol's outbound translator: one journal event in, the wire objects it makes
    out (none, one or several), knowing when the run it follows has ended (the stream then
    ends). Pure: no ORM, no I/O (``Prepare`` reads)."""

    @property
    def ended(self) -> bool: ...

    def translate(self, event: Event) -> Sequence[W_co]: ...


@overload
def journal_batches(
    *,
    thread_id: uuid.UUID,
    start: EventStreamStart,
    translator: Translator[W],
    prepare: Prepare[W] | None = None,
    follow: bool = False,
) -> AsyncGenerator[list[W] | None, None]: ...


@overload
def journal_batches(
    *,
    thread_id: uuid.UUID,
    start: EventStreamStart,
    translator: None,
    prepare: None = None,
    follow: bool = False,
) -> AsyncGenerator[list[Event] | None, None]: ...


@overload
def journal_batches(
    *,
    thread_id: uuid.UUID,
    start: EventStreamStart,
    translator: Translator[W] | None,
    prepare: Prepare[W] | None = None,
    follow: bool = False,
) -> AsyncGenerator[list[W] | list[Event] | None, None]: ...


async def journal_batches(
    *,
    thread_id: uuid.UUID,
    start: EventStreamStart,
    translator: Translator[W] | None,
    prepare: Prepare[W] | None = None,
    follow: bool = False,
) -> AsyncGenerator[list[W] | list[Event] | None, None]:
    """The wire objects of each batch of the thread's journal after ``start``, through
    ``translator`` (without one, the batch's events themselves); ``None`` while the journal
    is idle (a keep-alive is due). It ends with the journal (the chosen run's terminal event
    unless ``follow``) or when the translator says its run has ended."""
    batches = thread_events(thread_id=thread_id, start=start, follow=follow)
    try:
        async for batch in batches:
            if translator is None:
                yield batch or None
                del batch  # a stream idles for minutes: it keeps nothing it handed on
                continue
            wires: list[W] = list((await prepare(batch)) or ()) if prepare is not None else []
            for event in batch:
                wires += translator.translate(event)
            yield wires if batch or wires else None
            del batch, wires
            if translator.ended:
                return
    finally:
        await batches.aclose()


async def journal_stream(
    *,
    thread_id: uuid.UUID,
    start: EventStreamStart,
    translator: Translator[W] | None,
    frame: Callable[[W], bytes] | None = None,
    prepare: Prepare[W] | None = None,
    follow: bool = False,
    head: bytes = b"",
) -> AsyncGenerator[bytes, None]:
    """The SSE body of a thread's journal after ``start``: ``head`` (the reconnect delay, the
    objects a stream begins with), then one chunk per batch, each wire object framed by
    ``frame``, or a keep-alive comment for a batch that gives none. Without a translator,
    each event is sent as stored (``sse_frames_stored``)."""
    if head:
        yield head
    wire_batches = journal_batches(
        thread_id=thread_id, start=start, translator=translator, prepare=prepare, follow=follow
    )
    try:
        async for wires in wire_batches:
            if not wires:
                frames = b""
            elif translator is None:
                frames = sse_frames_stored(cast(list[Event], wires))
            else:
                assert frame is not None  # a translated stream frames its objects
                frames = b"".join([frame(wire) for wire in cast(list[W], wires)])
            yield frames or KEEP_ALIVE_FRAME
            del wires, frames  # not kept while the stream waits for the next
    finally:
        await wire_batches.aclose()
