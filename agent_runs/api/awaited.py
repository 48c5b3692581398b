"""A JSON answer that is known only once a run has got somewhere, sent without holding a
request thread while it waits.

A view returns ``awaited_response(request, produce)``; ``produce`` is a coroutine function
that waits (``agent_runs/events/wait.py``) and gives the status and the JSON body. Served by
``config/asgi_handler.py``, the view's thread goes back to the pool at once and ``produce``
is awaited on the event loop (the middleware has already run on the response, whose status
and body are then filled in; a client that goes away stops the wait). Served any other way
(Django's test client, a WSGI server), ``produce`` runs to its end in the view's thread.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from rest_framework.renderers import JSONRenderer

from agent_runs.db import db_call
from agent_runs.events.wait import run_events_wait
from agent_runs.models import Run

Produce = Callable[[], Awaitable[tuple[int, Any]]]

# Set on the requests of a handler that awaits an ``AwaitedResponse`` (no header can set it:
# request headers arrive in META as HTTP_*).
AWAITS_RESPONSES = "agent_runs.awaits_responses"


class AwaitedResponse(HttpResponse):
    def __init__(self, produce: Produce) -> None:
        super().__init__(content_type="application/json")
        self._produce = produce

    async def complete(self) -> None:
        """Wait for the answer, then take its status and body."""
        status, data = await self._produce()
        self.status_code = status
        self.content = _render(data)
        self.headers["Content-Length"] = str(len(self.content))


def awaited_response(request: HttpRequest, produce: Produce) -> HttpResponse:
    if request.META.get(AWAITS_RESPONSES):
        return AwaitedResponse(produce)
    status, data = async_to_sync(produce)()
    return HttpResponse(_render(data), status=status, content_type="application/json")


def run_end_answer(*, run: Run, after_id: int, read: Callable[[Run], Any]) -> Produce:
    """The answer of a request that waits for the run's end: once its journal has ended
    (followed from ``after_id``, the thread's last event before the run was created), or
    after ``AGENT_RESPONSE_WAIT_SECONDS`` if sooner, 200 and ``read(run)``, read on the shared
    executor (the run's final object, or as it then stands)."""

    async def answer() -> tuple[int, Any]:
        await run_events_wait(
            thread_id=run.thread_id,
            run_id=run.run_id,
            after_id=after_id,
            timeout=settings.AGENT_RESPONSE_WAIT_SECONDS,
        )
        return 200, await db_call(read, run)

    return answer


def _render(data: Any) -> bytes:
    """As DRF's ``Response`` renders JSON, so an awaited answer reads as an immediate one."""
    return JSONRenderer().render(data)
