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
from django.http import HttpRequest, HttpResponse
from rest_framework.renderers import JSONRenderer

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


def _render(data: Any) -> bytes:
    """As DRF's ``Response`` renders JSON, so an awaited answer reads as an immediate one."""
    return JSONRenderer().render(data)
