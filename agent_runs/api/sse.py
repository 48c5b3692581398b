"""Server-sent events framing (docs/spec/sse-events-and-usage.md, section 2), the one writer
of every protocol's frames: ``id`` / ``event`` / ``data`` lines, a frame per event,
separated by a blank line (``\\n\\n``, which every client splits on)."""

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from django.http import StreamingHttpResponse

from agent_runs.events.codec import Event

KEEP_ALIVE_FRAME = b": keep-alive\n\n"
# No cache may keep a stream, and no proxy buffer it (nginx reads X-Accel-Buffering).
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# The reconnect delay a stream tells its client first.
RETRY_MS = 3000


def sse_response(body: AsyncIterator[bytes] | Iterator[bytes]) -> StreamingHttpResponse:
    """A ``text/event-stream`` response of ``body``'s frames, as every protocol sends one."""
    return StreamingHttpResponse(body, content_type="text/event-stream", headers=SSE_HEADERS)


def sse_frame(event_id: int | None, payload: Any, *, named: bool = True) -> bytes:
    """One SSE event: an ``id:`` line when ``event_id`` is given (what ``Last-Event-ID``
    resumes after), an ``event:`` line naming the payload's ``type`` when ``named``, and the
    payload's JSON as its ``data:`` line."""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    if named:
        if event_id is None:
            return f"event: {payload['type']}\ndata: {data}\n\n".encode()
        return f"id: {event_id}\nevent: {payload['type']}\ndata: {data}\n\n".encode()
    if event_id is None:
        return f"data: {data}\n\n".encode()
    return f"id: {event_id}\ndata: {data}\n\n".encode()


def sse_frames_stored(events: Iterable[Event]) -> bytes:
    """The frames of journal events sent as stored: each ``data`` line is the event's JSON
    text as the journal gave it (Redis holds it as the writer encoded it; PostgreSQL gives
    it back in its own spacing and key order), so nothing is decoded or encoded again."""
    return "".join(
        [f"id: {event.id}\nevent: {event.type}\ndata: {event.data}\n\n" for event in events]
    ).encode()


def retry_frame(milliseconds: int = RETRY_MS) -> bytes:
    return f"retry: {milliseconds}\n\n".encode()
