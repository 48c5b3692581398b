"""HTTP metrics, and the probes and metrics answered before anything else.

Each request Django answers is counted by its route pattern (bounded: the URLconf's
patterns, or ``unmatched``), method and status, and timed until its response.
A plain synchronous middleware (``config/asgi_handler.py`` runs the chain in a thread): it
never touches a response's body, so a streamed response (SSE) streams as before, and its
time is the time to its headers. The event streams routed to Channels consumers do not go
through Django's middleware and are not counted here.

``/healthz``, ``/readyz`` and ``/metrics`` are answered here, first: a kubelet or a
Prometheus reaches a pod by its address, a ``Host`` that ``ALLOWED_HOSTS`` does not list,
and a probe must not be redirected to HTTPS either.
"""

import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase

from agent_runs.metrics import HTTP_REQUEST_DURATION, HTTP_REQUESTS
from ops import views

# Methods outside these are counted as "other", so a client cannot invent label values.
_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
_ANSWERED_FIRST: dict[str, Callable[[HttpRequest], HttpResponseBase]] = {
    "/healthz": views.healthz,
    "/readyz": views.readyz,
    "/metrics": views.metrics,
}


class HttpMetricsMiddleware:
    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        start = time.perf_counter()
        answer_first = _ANSWERED_FIRST.get(request.path_info)
        if answer_first is not None:
            response, route = answer_first(request), request.path_info
        else:
            response = self.get_response(request)
            match = request.resolver_match
            route = "unmatched" if match is None else f"/{match.route}"
        method = request.method if request.method in _METHODS else "other"
        HTTP_REQUESTS.labels(route, method, str(response.status_code)).inc()
        HTTP_REQUEST_DURATION.labels(route, method).observe(time.perf_counter() - start)
        return response
