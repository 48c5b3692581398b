"""The Agent Protocol's WebSocket ``/ws``: a client subscribes to its tasks and gets their
events, replayed from the journal and then live (docs/spec/agent-protocol-tasks.md,
WebSocket Events; docs/protocols/agent-protocol-ws.md).

Each subscription is one task on the socket's event loop reading the thread's journal
through the edge kit's loop (stream.py: PostgreSQL, then the process's Redis stream hub),
framed by the pure projection of outbound_ws.py. Authentication is the project's scope middleware
(bearer token, or the admin session from a page of this site), or ``?token=<stream token>``,
which allows its one thread only. An unauthenticated socket is accepted, told why, and
closed with code 4401 (a refused handshake reaches a browser as a bare 1006).
"""

import asyncio
import contextlib
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.utils import timezone

from agent_runs.api.authentication import bearer_key, stream_token_grant
from agent_runs.db import db_call
from agent_runs.events.reads import run_start_of_event
from agent_runs.models import Thread
from agent_runs.protocols.agent_protocol.outbound_ws import FrameCursor, frame_cursor
from agent_runs.protocols.agent_protocol.stream import task_frames

logger = logging.getLogger(__name__)

CLOSE_UNAUTHORIZED = 4401


@dataclass(frozen=True)
class _Principal:
    user: Any
    only_thread: uuid.UUID | None  # a stream token's thread: the one task it may follow


@dataclass(frozen=True)
class _Start:
    """Where a subscription's stream starts: the journal after ``after_id`` (the start of the
    cursor's run); the frames up to ``cursor`` only prime the projection."""

    thread_id: uuid.UUID
    after_id: int
    cursor: FrameCursor
    journal_begun: bool


class TaskEventsConsumer(AsyncJsonWebsocketConsumer):
    """Client messages: ``subscribe`` ``{agentId, lastEventId?}``, ``unsubscribe``
    ``{agentId}``, ``ping``. Many subscriptions may share a socket."""

    principal: _Principal | None = None

    async def connect(self) -> None:
        self.subscriptions: dict[uuid.UUID, asyncio.Task[None]] = {}
        self.principal = await db_call(_principal, self.scope)
        await self.accept()
        if self.principal is None:
            await self.send_json(
                {
                    "type": "error",
                    "error": "Unauthorized",
                    "message": "authentication required: a bearer token, a session or ?token=",
                }
            )
            await self.close(code=CLOSE_UNAUTHORIZED)
            return
        await self.send_json({"type": "connected", "timestamp": _now()})

    async def disconnect(self, code: int) -> None:
        subscriptions = getattr(self, "subscriptions", {})
        tasks = list(subscriptions.values())
        subscriptions.clear()
        await _stop(*tasks)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """A message that is not a JSON object is answered with an error; the socket stays
        open."""
        if self.principal is None:
            return  # closing
        try:
            content = json.loads(text_data if text_data is not None else (bytes_data or b""))
        except (ValueError, UnicodeDecodeError):
            await self._error(None, "Bad Request", "malformed JSON")
            return
        if not isinstance(content, dict):
            await self._error(None, "Bad Request", "a message is a JSON object")
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        kind = content.get("type")
        if kind == "subscribe":
            await self._subscribe(content)
        elif kind == "unsubscribe":
            await self._unsubscribe(content)
        elif kind == "ping":
            await self.send_json({"type": "pong", "timestamp": _now()})
        elif kind != "pong":  # a client's answer to our keep-alive needs none
            await self._error(content.get("agentId"), "Bad Request", f"unknown type {kind!r}")

    async def _subscribe(self, content: dict[str, Any]) -> None:
        """Answer ``subscribed``, then send the task's frames: every event after
        ``lastEventId`` (from the task's first without it), then live. Subscribing again to
        a task starts its stream again."""
        agent_id = content.get("agentId")
        if not isinstance(agent_id, str):
            await self._error(agent_id, "Bad Request", "agentId must be a task id")
            return
        try:
            last = content.get("lastEventId")
            cursor = None if last is None else frame_cursor(last)
        except ValueError:
            message = "lastEventId must be a frame's event_id (such as 67.1) or an event id"
            await self._error(agent_id, "Bad Request", message)
            return
        assert self.principal is not None
        try:
            start = await db_call(
                _subscription_start, principal=self.principal, task_id=agent_id, cursor=cursor
            )
        except Exception:
            logger.exception("subscription to task %s failed", agent_id)
            await self._error(agent_id, "Internal Server Error", "try again")
            return
        if start is None:
            await self._error(agent_id, "Not Found", "task not found")
            return
        await _stop(*filter(None, [self.subscriptions.pop(start.thread_id, None)]))
        await self.send_json({"type": "subscribed", "agentId": agent_id, "timestamp": _now()})
        self.subscriptions[start.thread_id] = asyncio.ensure_future(self._follow(start))

    async def _unsubscribe(self, content: dict[str, Any]) -> None:
        agent_id = content.get("agentId")
        thread_id = _uuid(agent_id)
        if thread_id is not None:
            await _stop(*filter(None, [self.subscriptions.pop(thread_id, None)]))
        await self.send_json({"type": "unsubscribed", "agentId": agent_id, "timestamp": _now()})

    async def _follow(self, start: _Start) -> None:
        """Send the task's frames until unsubscribed or disconnected; a keep-alive ``ping``
        while its stream is idle."""
        batches = task_frames(
            thread_id=start.thread_id,
            after_id=start.after_id,
            cursor=start.cursor,
            journal_begun=start.journal_begun,
        )
        try:
            async for frames in batches:
                if frames is None:
                    await self.send_json({"type": "ping", "timestamp": _now()})
                    continue
                for frame in frames:
                    await self.send_json(frame)
        except Exception:
            logger.exception("event stream of task %s failed", start.thread_id)
            if self.subscriptions.get(start.thread_id) is asyncio.current_task():
                del self.subscriptions[start.thread_id]
            message = "the task's event stream failed: subscribe again with lastEventId"
            with contextlib.suppress(Exception):  # the socket may be gone too
                await self._error(str(start.thread_id), "Internal Server Error", message)
        finally:
            await batches.aclose()

    async def _error(self, agent_id: Any, error: str, message: str) -> None:
        frame: dict[str, Any] = {"type": "error"}
        if agent_id is not None:
            frame["agentId"] = agent_id
        await self.send_json({**frame, "error": error, "message": message})


async def _stop(*tasks: asyncio.Task[None]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _now() -> str:
    return timezone.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _principal(scope: dict[str, Any]) -> _Principal | None:
    """Who the socket is: the scope's user (bearer token or session), else the holder of a
    stream token (``?token=``) limited to its thread. As in the scope middleware, a bearer
    header decides alone, and a stream token wins over a session. A session counts only on
    a socket opened by a page of this site: browsers send cookies with any page's WebSocket,
    and WebSockets have no CORS (cross-site WebSocket hijacking)."""
    headers = {name.lower(): value for name, value in scope.get("headers", [])}
    bearer = bearer_key(headers.get(b"authorization", b"").decode("latin-1")) is not None
    user = scope["user"]
    if user.is_authenticated:
        return _Principal(user=user, only_thread=None) if bearer or _same_site(headers) else None
    tokens = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    grant = stream_token_grant(tokens[0]) if tokens and not bearer else None
    return None if grant is None else _Principal(user=grant[0], only_thread=grant[1])


def _same_site(headers: dict[bytes, bytes]) -> bool:
    """The socket was opened by no browser page (no ``Origin``), by one of this host, or by
    one of ``CSRF_TRUSTED_ORIGINS``."""
    origin = headers.get(b"origin", b"").decode("latin-1")
    if not origin:
        return True
    host = headers.get(b"host", b"").decode("latin-1").lower()
    return urlsplit(origin).netloc.lower() == host or origin in settings.CSRF_TRUSTED_ORIGINS


def _subscription_start(
    *, principal: _Principal, task_id: str, cursor: FrameCursor | None
) -> _Start | None:
    """Where a subscription to the caller's task starts; ``None`` for a task that is not
    theirs (or not their stream token's). With a cursor the stream starts at the first event
    of the run the cursor is in, so the projection knows the run's open stage; without one,
    at the task's first event."""
    thread_id = _uuid(task_id)
    if thread_id is None or principal.only_thread not in (None, thread_id):
        return None
    if not Thread.objects.filter(pk=thread_id, owner_id=principal.user.pk).exists():
        return None
    if cursor is None or not cursor.event_id:
        return _Start(thread_id=thread_id, after_id=0, cursor=FrameCursor(0), journal_begun=False)
    run_start = run_start_of_event(thread_id=thread_id, event_id=cursor.event_id)
    if run_start is None:  # nothing of the task's at or before the cursor
        return _Start(
            thread_id=thread_id, after_id=cursor.event_id - 1, cursor=cursor, journal_begun=False
        )
    return _Start(
        thread_id=thread_id,
        after_id=run_start.first_event_id - 1,
        cursor=cursor,
        journal_begun=run_start.earlier_events,
    )
