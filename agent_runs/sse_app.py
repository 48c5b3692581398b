"""``GET /api/v1/agent/runs/{thread_id}/events`` as a plain ASGI app in front of Django.

Why not a Django view: Django's ASGI handler gives every request a thread of its own for its
synchronous parts (the request signals at least), and keeps it until the response ends. An
event stream stays open for minutes, so a thousand streams would hold a thousand threads.
Here a stream holds no thread: its few database reads run on the shared executor and give
their connection back at once, and its live events come from the process's stream hub.

What the endpoint does is the same as any API view: the same authentication (bearer token,
stream token, or the admin session), a 404 for a thread that is not the caller's, JSON
errors. spec/sse-events-and-usage.md, section 2.
"""

import asyncio
import io
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import import_module
from typing import Any

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404

from agent_runs import selectors
from agent_runs.authentication import stream_request_user
from agent_runs.schemas import parse_uuid
from agent_runs.streaming import db_call, thread_event_stream

logger = logging.getLogger(__name__)

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
_PATH = re.compile(r"^/api/v1/agent/runs/(?P<thread_id>[^/]+)/events/?$")


def with_event_stream(app: ASGIApp) -> ASGIApp:
    """Serve the event stream path here and pass everything else on to ``app``."""

    async def router(scope: dict[str, Any], receive: Any, send: Any) -> None:
        match = _PATH.match(scope["path"]) if scope["type"] == "http" else None
        thread_id = parse_uuid(match["thread_id"]) if match else None
        if thread_id is None:
            await app(scope, receive, send)
        else:
            await event_stream(scope, receive, send, thread_id)

    return router


async def event_stream(
    scope: dict[str, Any], receive: Any, send: Any, thread_id: uuid.UUID
) -> None:
    request = ASGIRequest(scope, io.BytesIO())
    if request.method != "GET":
        await _json(send, 405, {"detail": f'Method "{request.method}" not allowed.'})
        return
    cursor = request.headers.get("Last-Event-ID") or request.GET.get("lastEventId")
    if cursor is not None and not cursor.isdigit():
        await _json(send, 400, {"detail": "Last-Event-ID must be an event id"})
        return
    session_key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    opened = await db_call(
        _stream_open,
        request=request,
        thread_id=thread_id,
        after_id=int(cursor) if cursor is not None else None,
    )
    if isinstance(opened, tuple):
        await _json(send, *opened)
        return
    stream = thread_event_stream(
        thread_id=thread_id,
        start=opened,
        follow=request.GET.get("follow", "").lower() in ("1", "true", "yes"),
    )
    await _stream(send, receive, stream)


def _stream_open(
    *, request: ASGIRequest, thread_id: uuid.UUID, after_id: int | None
) -> selectors.EventStreamStart | tuple[int, dict[str, str], list[tuple[bytes, bytes]]]:
    """Who is asking, whether the thread is theirs, and where their stream starts: one trip
    to the executor for all three. An error is (status, body, extra headers)."""
    user = stream_request_user(request=request, thread_id=thread_id)
    if user is None:
        detail = {"detail": "Authentication credentials were not provided."}
        return 401, detail, [(b"www-authenticate", b"Bearer")]
    try:
        return selectors.event_stream_start(user=user, thread_id=thread_id, after_id=after_id)
    except Http404:
        return 404, {"detail": "Not found."}, []


async def _stream(send: Any, receive: Any, frames: AsyncIterator[bytes]) -> None:
    """Send the frames until they end or the client goes away; either way the frame
    generator is closed, which closes its hub subscription."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),  # nginx: do not buffer the stream
            ],
        }
    )

    async def pump() -> None:
        async for frame in frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    pumping = asyncio.ensure_future(pump())
    watching = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait({pumping, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (pumping, watching):
            task.cancel()
        results = await asyncio.gather(pumping, watching, return_exceptions=True)
        aclose = getattr(frames, "aclose", None)
        if aclose is not None:
            await aclose()
    error = results[0]
    if isinstance(error, Exception):
        logger.error("event stream failed", exc_info=error)


async def _json(
    send: Any,
    status: int,
    body: dict[str, str],
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})
