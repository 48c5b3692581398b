"""The default rendering of errors for the API: ``{"detail": "<message>"}``, the AG-UI and
spec shape. Every domain error carries its own status (agent_runs/errors.py); protocols with
another error shape render the same errors their own way.

What no view answers (a path no route matches, a body refused before any view runs) is
answered here in the shape of the protocol whose URL prefix the path is under
(``error_body``)."""

from typing import Any

from a2a.utils.errors import InvalidRequestError
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponsePermanentRedirect,
    JsonResponse,
)
from django.urls import resolve
from django.views.decorators.csrf import csrf_exempt
from django.views.defaults import page_not_found
from rest_framework.response import Response
from rest_framework.views import exception_handler

from agent_runs.errors import DomainError
from agent_runs.protocols.a2a import errors as a2a_errors
from agent_runs.protocols.agent_api import errors as agent_api_errors
from agent_runs.protocols.agent_protocol import errors as agent_protocol_errors
from agent_runs.protocols.openai_responses import errors as openai_errors

# The stable code of each status, where a shape carries one (OpenAI's, the Agent API's).
_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DomainError):
        return Response({"detail": str(exc)}, status=exc.status, headers=exc.headers)
    return exception_handler(exc, context)


def error_body(path: str, status: int, message: str) -> dict[str, Any] | None:
    """The body of an error answered outside any view, in the shape of the protocol served
    under ``path``'s prefix; ``None`` for a path outside the API (the admin, the console)."""
    code = _CODES.get(status)
    if _under(path, "/ap", "/api/tasks"):
        return agent_protocol_errors.error_body(status, message)
    if _under(path, "/api/v1/agent/process"):
        return agent_api_errors.error_body(code or "invalid_request", message)
    if _under(path, "/openai"):
        return openai_errors.error_body(status, message, code=code)
    if _under(path, "/a2a"):
        # As a request without credentials is answered: the HTTP status, a -32600 body.
        return a2a_errors.error_body(None, InvalidRequestError(message=message))
    if _under(path, "/api", "/storage"):
        return {"detail": message}
    return None


def _under(path: str, *prefixes: str) -> bool:
    """Whether ``path`` is one of ``prefixes``, or a path under one."""
    return any(path == prefix or path.startswith(f"{prefix}/") for prefix in prefixes)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 404 (``handler404``): the protocol's JSON 404 under an API prefix, Django's
    page elsewhere."""
    body = error_body(request.path, 404, "Not found.")
    if body is None:
        return page_not_found(request, exception or Http404())
    return JsonResponse(body, status=404)


@csrf_exempt  # it changes nothing: a POST is a 404 too, not a 403
def unrouted(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """The last route under each API prefix: a path no other route matches is the
    protocol's JSON 404 in every mode (``handler404`` is not called in debug mode, where
    Django answers with its own page listing the routes). A page whose route ends with a
    slash is still found without it, as Django's ``APPEND_SLASH`` finds it."""
    if request.method in ("GET", "HEAD") and resolve(f"{request.path_info}/").func is not unrouted:
        return HttpResponsePermanentRedirect(request.get_full_path(force_append_slash=True))
    return not_found(request)
