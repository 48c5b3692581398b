"""AG-UI events as SSE: ``GET /api/v1/agent/runs/{thread_id}/events`` (a thread's events,
resumable) and the stream a run's POST answers in single-request mode.

docs/spec/sse-events-and-usage.md, section 2. A Channels consumer rather than a Django view:
Django's ASGI handler gives every request a thread of its own for its synchronous parts and
keeps it until the response ends, and a stream stays open for minutes. Here a stream holds no
thread: its few database reads run on the shared executor and give their connection back at
once, and its live events come from the process's stream hub (agent_runs/events/follow.py).
Authentication is the project's scope middleware: bearer token, stream token or session.
"""

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import parse_qs

from channels.generic.http import AsyncHttpConsumer

from agent_runs import ports
from agent_runs.api.ids import run_id_or_404
from agent_runs.api.journal import Event, journal_stream
from agent_runs.api.sse import retry_frame, sse_frame
from agent_runs.db import db_call
from agent_runs.events.codec import TERMINAL_TYPES
from agent_runs.events.reads import EventStreamStart, event_stream_start
from agent_runs.models import Run
from agent_runs.protocols.agui.errors import NOT_AUTHENTICATED, error_parts
from agent_runs.protocols.agui.inbound import parse_event_cursor
from agent_runs.protocols.agui.outbound import ClientEvent, ClientEvents
from agent_runs.services.lifecycle import run_cancel

logger = logging.getLogger(__name__)

_TRUE = ("1", "true", "yes")


async def run_event_stream(
    *,
    run: Run,
    start: EventStreamStart,
    cancel_on_disconnect: bool,
    translate: ClientEvents | None,
) -> AsyncGenerator[bytes, None]:
    """The SSE body answering a run's POST (AG-UI single-request mode): the run's events
    from its ``RUN_STARTED`` (keep-alives while it is queued) to its terminal event, as
    stored or, with ``translate``, as AG-UI 1.0 clients take them. When the client goes away
    first, its iterator is closed early, and the run is cancelled unless
    ``cancel_on_disconnect`` is off: for AG-UI's ``HttpAgent`` aborting the request is the
    only way to stop a run."""
    client_form = None if translate is None else ClientForm(translate, run_pk=run.pk)
    body = journal_stream(
        thread_id=run.thread_id,
        start=start,
        translator=client_form,
        frame=_client_frame,
        prepare=client_form.prepare if client_form is not None else None,
        head=retry_frame(),
    )
    try:
        async for chunk in body:
            yield chunk
    except (asyncio.CancelledError, GeneratorExit):
        # The client went away before the run's end: cancelled while sending, or closed
        # at a yield. (A run that has ended meanwhile is left as it is.)
        if cancel_on_disconnect:
            await db_call(run_cancel, run=run)
        raise
    finally:
        await body.aclose()


class ClientForm:
    """The edge kit's ``Translator`` over a run's ``ClientEvents``: the run's usage, read
    once its terminal event is written (``prepare``), given to the pure translator before it
    translates that event."""

    ended = False  # the journal's stream ends the run's stream, not the translation

    def __init__(self, events: ClientEvents, *, run_pk: int) -> None:
        self.events = events
        self._run_pk = run_pk

    async def prepare(self, batch: list[Event]) -> None:
        ended = next((event for event in batch if event.type in TERMINAL_TYPES), None)
        if ended is not None:
            self.events.usage = await db_call(
                ports.billing().run_usage_by_model, run_pk=self._run_pk, recorded_by=ended.at
            )

    def translate(self, event: Event) -> list[ClientEvent]:
        return self.events.translate(event)


def _client_frame(sent: ClientEvent) -> bytes:
    return sse_frame(*sent)


class EventStreamConsumer(AsyncHttpConsumer):
    """Query: ``lastEventId`` (or the ``Last-Event-ID`` header) resumes after an event;
    ``runId`` picks the run whose terminal event ends the stream (the latest by default);
    ``follow=true`` keeps it open across runs."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Channels' dispatch loop, cut short: a stream is a GET answered by one long
        response, so its request is read here and handled at once, and the stream itself
        watches for the disconnect. (The loop would hold a task and its frames for as long
        as the stream is open: about 1 KB of each of a thousand idle streams.)"""
        self.scope = scope
        self.base_send = send
        self._receive = receive
        message = await receive()
        while message["type"] == "http.request" and message.get("more_body"):
            message = await receive()
        if message["type"] == "http.request":
            await self.handle(b"")  # the body of a GET is not read

    async def handle(self, body: bytes) -> None:
        if self.scope["method"] != "GET":
            method = self.scope["method"]
            await self._error(405, {"detail": f'Method "{method}" not allowed.'}, [])
            return
        query = {key: values[-1] for key, values in parse_qs(self._query_string()).items()}
        headers = {name.lower(): value for name, value in self.scope["headers"]}
        thread_id: uuid.UUID = self.scope["url_route"]["kwargs"]["thread_id"]
        try:
            header_cursor = headers.get(b"last-event-id")
            after_id = parse_event_cursor(
                header_cursor.decode("latin-1") if header_cursor else query.get("lastEventId")
            )
            # Who asks, whether the thread is theirs and where the stream starts: one trip
            # to the executor for all three.
            start = await db_call(
                _stream_start,
                user=self.scope["user"],
                thread_id=thread_id,
                after_id=after_id,
                run_id=_run_id(query.get("runId")),
            )
        except Exception as exc:
            await self._error(*error_parts(exc))
            return
        if start is None:
            await self._error(*NOT_AUTHENTICATED)
            return
        follow = query.get("follow", "").lower() in _TRUE
        await self._stream(
            journal_stream(
                thread_id=thread_id, start=start, translator=None, follow=follow, head=retry_frame()
            )
        )

    def _query_string(self) -> str:
        return bytes(self.scope.get("query_string", b"")).decode("utf-8", "replace")

    async def _stream(self, body: AsyncGenerator[bytes, None]) -> None:
        """Send the stream until it ends or the client goes away; either way its generator
        is closed, which closes its hub subscription."""
        await self.send_headers(
            status=200,
            headers=[
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),  # nginx: do not buffer the stream
            ],
        )

        async def pump() -> None:
            async for chunk in body:
                await self.send_body(chunk, more_body=True)  # one write per batch
            await self.send_body(b"")

        async def disconnected() -> None:
            while (await self._receive())["type"] != "http.disconnect":
                pass

        pumping = asyncio.ensure_future(pump())
        watching = asyncio.ensure_future(disconnected())
        try:
            await asyncio.wait({pumping, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pumping, watching):
                task.cancel()
            results = await asyncio.gather(pumping, watching, return_exceptions=True)
            await body.aclose()
        if isinstance(results[0], Exception):
            logger.error("event stream failed", exc_info=results[0])

    async def _error(
        self, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]
    ) -> None:
        await self.send_response(
            status,
            json.dumps(body).encode(),
            headers=[(b"content-type", b"application/json"), *headers],
        )


def _run_id(value: str | None) -> str | None:
    """The run a stream names (``runId``); one no run can have is a 404."""
    return run_id_or_404(value) if value else None


def _stream_start(
    *, user: Any, thread_id: uuid.UUID, after_id: int | None, run_id: str | None
) -> EventStreamStart | None:
    """Where the caller's stream starts; ``None`` for a caller who is not authenticated."""
    if not user.is_authenticated:
        return None
    return event_stream_start(user=user, thread_id=thread_id, after_id=after_id, run_id=run_id)
