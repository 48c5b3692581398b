"""Django's ASGI handler, with each request's synchronous work done in one trip to a thread.

Django's own ``ASGIHandler`` runs the middleware chain in async mode: every middleware here
is a synchronous one that Django adapts, so each of its methods is a hop to a thread and
back, and the request signals are hops of their own; a run's POST made many such hops,
costlier than the view itself (docs/benchmarks.md, "Runs API"). This handler loads the chain
in synchronous mode, as a WSGI server would run it, and calls it once per request on a
thread pool of its own: the request signals, the middleware, the view and, for an ordinary
response, its closing, all in the same thread, so the database connection the request used
goes back to the pool in the thread that took it.
The pool is sized as Python sizes its default one (the cores plus four, at most 32): more
threads only contend for the interpreter, which costs throughput. The event streams' short
reads keep the loop's default executor, so a burst of slow requests cannot hold them up;
between them, the threads must not need more connections than ``DATABASE_POOL_MAX_SIZE``.

Everything else is Django's: reading the body, building the request, sending the response.
A streaming response (a run's events in AG-UI's single-request mode, the admin's file
downloads) gives its database connection back before it starts, and is sent as Django's own
handler sends one: until it ends or the client goes away, whichever comes first; a
disconnect cancels the sending, which closes the response's iterator (the AG-UI stream
cancels its run then). It is closed afterwards on another thread. An ``AwaitedResponse`` (a
run's outcome, ``agent_runs/api/awaited.py``) is completed on the loop, the view's thread already
back in the pool, and sent unless the client has gone away meanwhile.
"""

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.db import close_old_connections
from django.http import FileResponse, HttpResponseBase
from django.urls import set_script_prefix

from agent_runs.api.awaited import AWAITS_RESPONSES, AwaitedResponse


class SyncChainASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        self.executor = ThreadPoolExecutor(
            max_workers=min(32, (os.cpu_count() or 1) + 4), thread_name_prefix="request"
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            response = await sync_to_async(
                self._respond, thread_sensitive=False, executor=self.executor
            )(scope, body_file)
            if isinstance(response, AwaitedResponse) and not await self._complete_unless_gone(
                response, receive
            ):
                return
            try:
                if response.streaming:
                    await self._send_until_disconnect(response, send, receive)
                else:
                    await self.send_response(response, send)
            finally:
                if response.streaming:
                    await sync_to_async(response.close, thread_sensitive=False)()
        finally:
            body_file.close()

    async def _send_until_disconnect(
        self, response: HttpResponseBase, send: Any, receive: Any
    ) -> None:
        sending = asyncio.ensure_future(self.send_response(response, send))
        watching = asyncio.ensure_future(self.listen_for_disconnect(receive))
        try:
            await asyncio.wait({sending, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sending, watching):
                task.cancel()
            sent, _ = await asyncio.gather(sending, watching, return_exceptions=True)
        if isinstance(sent, Exception):
            raise sent

    async def _complete_unless_gone(self, response: AwaitedResponse, receive: Any) -> bool:
        """Wait for the response's answer; ``False`` when the client went away first (the
        wait is stopped then, and there is nobody to answer)."""
        completing = asyncio.ensure_future(response.complete())
        watching = asyncio.ensure_future(self.listen_for_disconnect(receive))
        try:
            await asyncio.wait({completing, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (completing, watching):
                task.cancel()
            completed, _ = await asyncio.gather(completing, watching, return_exceptions=True)
        if isinstance(completed, asyncio.CancelledError):
            return False
        if isinstance(completed, BaseException):
            raise completed
        return True

    def _respond(self, scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            response = cast(HttpResponseBase, error_response)
        else:
            request.META[AWAITS_RESPONSES] = True
            response = self.get_response(request)
            response._handler_class = self.__class__  # type: ignore[attr-defined]  # as Django does
            if isinstance(response, FileResponse):
                response.block_size = self.chunk_size
        if response.streaming:
            # Sent from the event loop, for as long as it streams: the connection this thread
            # used goes back now, not at the thread's next request.
            close_old_connections()
        else:
            # The content is in memory: close now, in this thread (request_finished gives the
            # request's database connection back).
            response.close()
        return response
